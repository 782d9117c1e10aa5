/**
 * An order service that imports payment-workflows: README "Using it" (the library inside an order service) shows this
 * code. test/package/package.test.ts installs the package's tarball beside it, type-checks it against the package's
 * .d.ts, runs it on the test's dev server and simulator, and reads the payment it prints.
 */
import { Client } from '@temporalio/client';
import { NativeConnection } from '@temporalio/worker';
import { PaymentsClient } from 'payment-workflows/client';
import { type ChargeRequestInput, type PaymentView, defaultPaymentTimings } from 'payment-workflows/domain';
import { createPaymentWorkers, createProvider, simulatorCapabilities } from 'payment-workflows/worker';

/** The order service's own settings (here from the environment the test gives it). */
function setting(name: string): string {
  const value = process.env[name];
  if (value === undefined) throw new TypeError(`${name} is not set`);
  return value;
}

async function main(): Promise<void> {
  const taskQueue = setting('TASK_QUEUE');
  // The order service's one connection to Temporal: its own workers, the payment workers and the client share it.
  const connection = await NativeConnection.connect({ address: setting('TEMPORAL_ADDRESS') });
  const workers = await createPaymentWorkers({
    connection,
    taskQueue,
    providers: {
      simulator: createProvider({
        name: 'simulator',
        baseUrl: setting('SIMULATOR_URL'),
        apiKey: setting('PROVIDER_API_KEY'),
        capabilities: simulatorCapabilities(),
        connectTimeoutMs: 2_000,
        totalTimeoutMs: 10_000,
      }),
    },
  });
  const running = workers.run();
  try {
    const payments = new PaymentsClient(new Client({ connection }), { taskQueue, timings: defaultPaymentTimings });
    const order: ChargeRequestInput = {
      orderId: setting('ORDER_ID'),
      amount: { value: 1250, currency: 'EUR' },
      paymentMethod: 'pm_card_visa',
    };
    // One idempotency key per intent, created before the first call: a repeat answers the first payment.
    const { view } = await payments.charge(setting('MERCHANT_ID'), setting('PAYMENT_KEY'), order);
    const paid: PaymentView = view;
    console.log(JSON.stringify({ sweep: workers.sweep, payment: paid }));
  } finally {
    await workers.close();
    await running;
    await connection.close();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
