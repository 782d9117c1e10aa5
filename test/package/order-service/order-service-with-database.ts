/**
 * An order service that imports payment-workflows with its PostgreSQL: README "With the payments' database" shows this
 * code. test/package/package.test.ts runs it beside order-service.ts: a wallet credited by the service, a payment split
 * between the wallet and the card, a wallet-only payment the wallet cannot cover, and the split payment's key kept in
 * the key-record table by the workers.
 */
import { Client } from '@temporalio/client';
import { NativeConnection } from '@temporalio/worker';
import { PaymentsClient } from 'payment-workflows/client';
import { openPaymentDatabase } from 'payment-workflows/database';
import { type ChargeRequestInput, defaultPaymentTimings } from 'payment-workflows/domain';
import { createPaymentWorkers, createProvider, simulatorCapabilities } from 'payment-workflows/worker';

/** The order service's own settings (here from the environment the test gives it). */
function setting(name: string): string {
  const value = process.env[name];
  if (value === undefined) throw new TypeError(`${name} is not set`);
  return value;
}

async function main(): Promise<void> {
  const taskQueue = setting('TASK_QUEUE');
  const merchantId = setting('MERCHANT_ID');
  const walletId = setting('WALLET_ID');
  // Opened once, migrated on open; the workers and the client share it, and it closes after both.
  const database = await openPaymentDatabase({ url: setting('DATABASE_URL') });
  const connection = await NativeConnection.connect({ address: setting('TEMPORAL_ADDRESS') });
  const workers = await createPaymentWorkers({
    connection,
    taskQueue,
    database,
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
    const payments = new PaymentsClient(new Client({ connection }), {
      taskQueue,
      timings: defaultPaymentTimings,
      ...database.clientOptions,
    });
    // Store credit of EUR 8.00, under a key of its own: a repeat credits nothing more.
    await database.wallets.credit(merchantId, walletId, setting('CREDIT_KEY'), {
      amount: { value: 800, currency: 'EUR' },
      reason: 'store credit',
    });
    // EUR 12.50: 5.00 from the wallet, the rest from the card.
    const split: ChargeRequestInput = {
      orderId: setting('ORDER_ID'),
      amount: { value: 1250, currency: 'EUR' },
      paymentMethod: 'pm_card_visa',
      wallet: { walletId, amount: 500 },
    };
    const { view: splitView } = await payments.charge(merchantId, setting('PAYMENT_KEY'), split);
    // EUR 4.00 from the wallet alone, which has 3.00 left: declined, nothing sent to the provider.
    const walletOnly: ChargeRequestInput = {
      orderId: setting('SECOND_ORDER_ID'),
      amount: { value: 400, currency: 'EUR' },
      paymentMethod: 'pm_card_visa', // never charged: the wallet part is the whole amount
      wallet: { walletId, amount: 400 },
    };
    const { view: walletOnlyView } = await payments.charge(merchantId, setting('SECOND_PAYMENT_KEY'), walletOnly);
    // The workers keep the split payment's first answer; a repeat of its key answers it once the workflow is gone.
    let record = await database.keyRecords.find('charge', merchantId, setting('PAYMENT_KEY'));
    for (let tries = 0; record === undefined && tries < 50; tries += 1) {
      await new Promise((resolve) => setTimeout(resolve, 200));
      record = await database.keyRecords.find('charge', merchantId, setting('PAYMENT_KEY'));
    }
    const wallet = await database.wallets.get(merchantId, walletId);
    console.log(JSON.stringify({ split: splitView, walletOnly: walletOnlyView, wallet, keyRecord: record }));
  } finally {
    await workers.close();
    await running;
    await connection.close();
    await database.close();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
