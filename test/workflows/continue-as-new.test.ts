/**
 * A long-lived payment continues as new when the server suggests it, carrying its whole state: amounts, the events it
 * already applied (so a redelivered webhook still changes nothing) and the fingerprint memo the client compares.
 * Runs on a dev server of its own whose suggestion threshold is tiny (the default is thousands of events).
 */
import { type TestWorkflowEnvironment } from '@temporalio/testing';
import { paymentQuery, refundUpdate, webhookSignal } from '../../src/domain/definitions';
import { ErrorType } from '../../src/domain/errors';
import { startDevServer } from '../../scripts/lib/dev-server';
import { type Bench, chargeRequest, startBench } from '../helpers/payments';
import { effectsOf, startCharge } from '../helpers/workflows';

let env: TestWorkflowEnvironment;
let bench: Bench | undefined;

beforeAll(async () => {
  env = await startDevServer({
    extraArgs: ['--dynamic-config-value', 'limit.historyCount.suggestContinueAsNew=40'],
  });
});
afterAll(async () => {
  await bench?.close();
  await env?.teardown();
});

it('continues as new past the suggested history size and keeps its state, dedup set and memo', async () => {
  const b = (bench = await startBench(env));
  await b.run(async () => {
    const input = b.input(chargeRequest({ amount: { value: 10_000, currency: 'EUR' } }));
    const { handle, view } = await startCharge(b, input);
    expect(view.status).toBe('succeeded');
    const firstRunId = (await handle.describe()).runId;
    const payment = await b.provider.getPayment(view.providerPaymentId as string);
    if (!payment) throw new Error('simulator lost the payment');

    // Every signal and update adds history events; a few refunds plus redelivered webhooks pass the threshold.
    for (let i = 0; i < 4; i++) {
      await handle.executeUpdate(refundUpdate, { args: [{ refundKey: `r-${i}`, fingerprint: `f-${i}`, amount: 100 }] });
    }
    const event = { eventId: 'evt_dup', type: 'payment.succeeded' as const, created: payment.created, payment };
    for (let i = 0; i < 15; i++) await handle.signal(webhookSignal, event);

    const deadline = Date.now() + 20_000;
    let runId = firstRunId;
    while (runId === firstRunId && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 200));
      runId = (await handle.describe()).runId;
    }
    expect(runId).not.toBe(firstRunId);

    const latest = b.env.client.workflow.getHandle(handle.workflowId);
    const described = await latest.describe();
    expect(described.memo?.fingerprint).toBe(input.fingerprint);
    const after = await latest.query(paymentQuery);
    expect(after).toMatchObject({ status: 'succeeded', amountCaptured: 10_000, amountRefunded: 400 });
    expect(after.providerPaymentId).toBe(view.providerPaymentId);

    // The new run still validates against the carried state: refund what is left, not more.
    await expect(
      latest.executeUpdate(refundUpdate, { args: [{ refundKey: 'r-big', fingerprint: 'f-big', amount: 9_601 }] }),
    ).rejects.toMatchObject({ cause: { type: ErrorType.AmountExceeded } });
    const rest = await latest.executeUpdate(refundUpdate, {
      args: [{ refundKey: 'r-rest', fingerprint: 'f-rest', amount: 9_600 }],
    });
    expect(rest.amountRefunded).toBe(10_000);
    // A refund key used in the first run is still known: no second effect.
    await latest.executeUpdate(refundUpdate, { args: [{ refundKey: 'r-0', fingerprint: 'f-0', amount: 100 }] });
    expect(effectsOf(b, 'refund')).toHaveLength(5);
    // The carried dedup set: the same webhook again changes nothing.
    await latest.signal(webhookSignal, event);
    expect((await latest.query(paymentQuery)).amountRefunded).toBe(10_000);
  });
});
