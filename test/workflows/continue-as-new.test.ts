/**
 * A long-lived payment continues as new when the server suggests it, carrying its whole state: amounts, the events it
 * already applied (so a redelivered webhook still changes nothing) and the fingerprint memo the client compares.
 * Runs on a dev server of its own whose suggestion threshold is tiny (the default is thousands of events).
 *
 * A redelivered event is invisible in the view (application is forward-only), so the dedup set is read where the
 * workflow hands it over: the input of each continued-as-new run.
 */
import { paymentQuery, refundUpdate, webhookSignal } from '../../src/domain/definitions';
import { ErrorType } from '../../src/domain/errors';
import { reconcileWorkflowId } from '../../src/domain/ids';
import { startDevServer } from '../../scripts/lib/dev-server';
import { serverPerFile } from '../helpers/benches';
import { carriedChargeState, runChain } from '../helpers/history';
import { chargeRequest } from '../helpers/payments';
import { effectsOf, startCharge } from '../helpers/workflows';

const t = serverPerFile(() =>
  startDevServer({
    extraArgs: ['--dynamic-config-value', 'limit.historyCount.suggestContinueAsNew=40'],
  }),
);

it('continues as new past the suggested history size and keeps its state, dedup set and memo', async () => {
  const b = await t.bench();
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
    await handle.signal(webhookSignal, { ...event, eventId: 'evt_other' });
    for (let i = 0; i < 15; i++) await handle.signal(webhookSignal, event);

    // The run that took the deliveries hands its state over when it continues as new; find that run (the refunds alone
    // may already have made the workflow continue before the deliveries arrived).
    const carriedSets = async () => {
      const chain = await runChain(b.env.client, handle.workflowId, firstRunId);
      const sets = [];
      for (const runId of chain.slice(1)) {
        sets.push((await carriedChargeState(b.env.client, handle.workflowId, runId))?.state.seenEvents ?? []);
      }
      return sets;
    };
    const deadline = Date.now() + 20_000;
    let sets = await carriedSets();
    while (!sets.some((seen) => seen.includes('evt_dup')) && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 200));
      sets = await carriedSets();
    }
    // Sixteen deliveries of two events: what was handed over remembers each event once.
    expect(sets.find((seen) => seen.includes('evt_dup'))).toEqual(['evt_other', 'evt_dup']);

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
    // The carried dedup set: a run that started with it takes the same webhook as already seen. Redeliver it until
    // the current run continues as new too, and read what it hands over: still each event once.
    const runsBefore = (await carriedSets()).length;
    const secondDeadline = Date.now() + 20_000;
    do {
      await latest.signal(webhookSignal, event);
      sets = await carriedSets();
    } while (sets.length === runsBefore && Date.now() < secondDeadline);
    expect(sets.length).toBeGreaterThan(runsBefore);
    expect(sets[runsBefore - 1]).toContain('evt_dup'); // the run that took the redeliveries started with the set
    expect(sets[sets.length - 1]).toEqual(['evt_other', 'evt_dup']);
    expect((await latest.query(paymentQuery)).amountRefunded).toBe(10_000);
  });
});

it('continues as new while unknown (its reconcile gone, waiting for the sweep), and stays unknown in the new run', async () => {
  const b = await t.bench();
  await b.run(async () => {
    // Another payment, made first: its events are foreign to the one under test.
    const other = await startCharge(b, b.input(chargeRequest()));
    const foreign = await b.provider.getPayment(other.view.providerPaymentId as string);
    if (!foreign) throw new Error('simulator lost the payment');
    const input = b.input(chargeRequest(), {
      retry: { create: { initialIntervalMs: 100, maximumIntervalMs: 200, attemptTimeoutMs: 4_000, budgetMs: 8_000 } },
      timings: { reconcileScheduleMs: [3_600_000] },
    });
    // Every create is reset before it commits: the outcome is unknown, a reconcile starts and waits an hour.
    b.sim.addFaults({
      rules: [{ match: { operation: 'create', reference: input.request.orderId }, fault: 'reset_before_commit' }],
    });
    const { handle } = await startCharge(b, input);
    const reconcile = b.env.client.workflow.getHandle(reconcileWorkflowId(input.merchantId, 'create', input.key));
    const deadline = Date.now() + 20_000;
    while (
      (await reconcile.describe().then(
        (d) => d.status.name,
        () => '',
      )) !== 'RUNNING' &&
      Date.now() < deadline
    )
      await new Promise((r) => setTimeout(r, 100));
    const firstRunId = (await handle.describe()).runId;
    await reconcile.terminate('lost reconcile');
    // Events about other payments change nothing but history: the run grows past the threshold while unknown.
    for (let i = 0; i < 20; i++) {
      await handle.signal(webhookSignal, {
        eventId: `evt_foreign_${i}`,
        type: 'payment.succeeded',
        created: foreign.created,
        payment: foreign,
      });
    }
    const chain = await eventuallyValue(async () => {
      const runs = await runChain(b.env.client, handle.workflowId, firstRunId);
      return runs.length > 1 ? runs : undefined;
    });
    expect(chain.length).toBeGreaterThan(1);
    const after = await b.env.client.workflow.getHandle(handle.workflowId).query(paymentQuery);
    expect(after.status).toBe('unknown');
    expect(after.unknownSince).toBeDefined();
    expect(after.providerPaymentId).toBeUndefined();
    expect(effectsOf(b, 'create').filter((e) => e.reference === input.request.orderId)).toHaveLength(0);
  });
});

/** Polls until `probe` answers a value (bounded: 20 s). */
async function eventuallyValue<T>(probe: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 200));
  }
}
