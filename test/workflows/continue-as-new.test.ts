/**
 * A long-lived payment continues as new when the server suggests it, carrying its whole state: amounts, the events it
 * already applied (so a redelivered webhook still changes nothing) and the fingerprint memo the client compares.
 * Runs on a dev server of its own whose suggestion threshold is tiny (the default is thousands of events).
 *
 * A redelivered event is invisible in the view (application is forward-only), so the dedup set is read where the
 * workflow hands it over: the input of each continued-as-new run.
 */
import { randomUUID } from 'node:crypto';
import { defaultPayloadConverter } from '@temporalio/common';
import { paymentQuery, webhookSignal } from '../../src/domain/definitions';
import { ErrorType } from '../../src/domain/errors';
import type { PaymentNews } from '../../src/activities/handoffs';
import type { KeyAnswer } from '../../src/domain/key-records';
import { reconcileWorkflowId } from '../../src/domain/ids';
import { startDevServer } from '../../scripts/lib/dev-server';
import type { PaymentView } from '../../src/domain/payment';
import type { reconcileSweepWorkflow } from '../../src/workflows/sweep';
import { type World, serverPerFile } from '../helpers/world';
import { eventually } from '../helpers/eventually';
import { carriedChargeState, runChain } from '../helpers/history';
import { chargeRequest } from '../helpers/payments';
import { sweepInputOver } from '../helpers/sweeps';
import { refund, refusalType } from '../helpers/requests';
import { effectsOf, recordHistories, startCharge } from '../helpers/workflows';

const t = serverPerFile(() =>
  startDevServer({
    extraArgs: ['--dynamic-config-value', 'limit.historyCount.suggestContinueAsNew=40'],
  }),
);

it('continues as new past the suggested history size and keeps its state, dedup set and memo', async () => {
  const b = await t.world();
  await b.run(async () => {
    const input = b.input(chargeRequest({ amount: { value: 10_000, currency: 'EUR' } }));
    const { handle, view } = await startCharge(b, input);
    expect(view.status).toBe('succeeded');
    const firstRunId = (await handle.describe()).runId;
    const payment = await b.provider.getPayment(view.providerPaymentId as string);
    if (!payment) throw new Error('simulator lost the payment');

    // Every signal and request adds history events; a few refunds plus redelivered webhooks pass the threshold.
    for (let i = 0; i < 4; i++) {
      await refund(handle, { refundKey: `r-${i}`, fingerprint: `f-${i}`, amount: 100 });
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
    expect(await refusalType(refund(latest, { refundKey: 'r-big', fingerprint: 'f-big', amount: 9_601 }))).toBe(
      ErrorType.AmountExceeded,
    );
    const rest = await refund(latest, { refundKey: 'r-rest', fingerprint: 'f-rest', amount: 9_600 });
    expect(rest.amountRefunded).toBe(10_000);
    // A refund key used in the first run is still known: no second effect.
    await refund(latest, { refundKey: 'r-0', fingerprint: 'f-0', amount: 100 });
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

/**
 * A payment made unknown (every create reset before it commits), its reconcile lost (terminated), and `wait` before
 * events about another payment grow its history past the threshold: it continues as new while unknown.
 */
async function unknownThenContinued(b: World, wait: (view: PaymentView) => Promise<void> = async () => undefined) {
  // Another payment, made first: its events are foreign to the one under test.
  const other = await startCharge(b, b.input(chargeRequest()));
  const foreign = await b.provider.getPayment(other.view.providerPaymentId as string);
  if (!foreign) throw new Error('simulator lost the payment');
  const input = b.input(chargeRequest(), {
    retry: { create: { initialIntervalMs: 100, maximumIntervalMs: 200, attemptTimeoutMs: 4_000, budgetMs: 4_000 } },
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
  await wait(await handle.query(paymentQuery));
  // Events about other payments change nothing but history: the run grows past the threshold while unknown.
  for (let i = 0; i < 20; i++) {
    await handle.signal(webhookSignal, {
      eventId: `evt_foreign_${i}`,
      type: 'payment.succeeded',
      created: foreign.created,
      payment: foreign,
    });
  }
  const chain = await eventually(
    'a continued run',
    async () => {
      const runs = await runChain(b.env.client, handle.workflowId, firstRunId);
      return runs.length > 1 ? runs : undefined;
    },
    20_000,
    200,
  );
  return { input, handle, reconcile, chain };
}

it('continues as new while unknown (its reconcile gone, waiting for the sweep), and stays unknown in the new run', async () => {
  const b = await t.world();
  await b.run(async () => {
    const { input, handle, chain } = await unknownThenContinued(b);
    expect(chain.length).toBeGreaterThan(1);
    const after = await b.env.client.workflow.getHandle(handle.workflowId).query(paymentQuery);
    expect(after.status).toBe('unknown');
    expect(after.unknownSince).toBeDefined();
    expect(after.providerPaymentId).toBeUndefined();
    expect(effectsOf(b, 'create').filter((e) => e.reference === input.request.orderId)).toHaveLength(0);
  });
});

it('the sweep finds a payment unknown past its threshold whose run continued as new after it became unknown', async () => {
  const b = await t.world({ sweep: true });
  await b.run(async () => {
    // Two seconds between becoming unknown and continuing as new: the sweep's cut-off falls between the two.
    const { handle, reconcile, chain } = await unknownThenContinued(b, async (view) => {
      const gapUntil = Date.parse(view.unknownSince as string) + 2_000;
      await new Promise((r) => setTimeout(r, Math.max(0, gapUntil - Date.now())));
    });
    const latest = b.env.client.workflow.getHandle(handle.workflowId, chain[chain.length - 1]);
    const unknownSinceMs = Date.parse((await latest.query(paymentQuery)).unknownSince as string);
    const runStartMs = (await latest.describe()).startTime.getTime();
    expect(runStartMs - unknownSinceMs).toBeGreaterThanOrEqual(2_000);
    // The current run is what visibility lists as running (it lags the continue-as-new a little).
    const namespace = b.env.namespace ?? 'default';
    await eventually(
      'the continued run visible as unknown',
      async () => {
        const { executions } = await b.env.client.workflowService.listWorkflowExecutions({
          namespace,
          query: `WorkflowId = '${handle.workflowId}' AND ExecutionStatus = 'Running' AND PaymentStatus = 'unknown'`,
        });
        return executions.length === 1 || undefined;
      },
      20_000,
      200,
    );

    // Unknown for longer than the threshold, but its current run started within it.
    const cutoffMs = Math.round((unknownSinceMs + runStartMs) / 2);
    const result = await b.env.client.workflow.execute<typeof reconcileSweepWorkflow>('reconcileSweepWorkflow', {
      workflowId: `sweep-test:${randomUUID()}`,
      taskQueue: b.taskQueue,
      args: [
        sweepInputOver(
          { fromMs: unknownSinceMs - 3_600_000, toMs: unknownSinceMs - 3_000_000 },
          { unknownThresholdMs: Date.now() - cutoffMs },
        ),
      ],
    });
    expect(result).toMatchObject({ stuckUnknown: 1, reconcilesEnsured: 1 });
    // The payment's current run got the signal and started a reconcile again.
    const again = await eventually(
      'a running reconcile',
      async () => {
        const d = await reconcile.describe();
        return d.status.name === 'RUNNING' ? d : undefined;
      },
      20_000,
      200,
    );
    expect(again.status.name).toBe('RUNNING');
    await recordHistories(b, 'charge-unknown-continued-swept', [handle.workflowId]);
  });
});

it.each([
  ['alone', {}],
  ['with merchant events (one handOverPaymentNews per task)', { merchantEvents: true as const }],
])(
  'hands each key’s first answer over once across continue-as-new (%s): the charge in the first run, each refund once',
  async (_what, events) => {
    const b = await t.world();
    await b.run(async () => {
      const input = {
        ...b.input(chargeRequest({ amount: { value: 10_000, currency: 'EUR' } })),
        keyRecords: true as const,
        ...events,
      };
      const { handle, view } = await startCharge(b, input);
      expect(view.status).toBe('succeeded');
      const firstRunId = (await handle.describe()).runId;
      // Refunds until the run has continued as new at least once, then one more in the new run.
      let refunds = 0;
      const deadline = Date.now() + 30_000;
      while ((await runChain(b.env.client, handle.workflowId, firstRunId)).length < 2 && Date.now() < deadline) {
        await refund(handle, { refundKey: `r-${refunds}`, fingerprint: `f-${refunds}`, amount: 100 });
        refunds += 1;
      }
      const latest = b.env.client.workflow.getHandle(handle.workflowId);
      await refund(latest, { refundKey: 'r-last', fingerprint: 'f-last', amount: 100 });
      refunds += 1;

      // Every handoff of the chain, read from each run's history once the last one is scheduled (the workers answer
      // `disabled`: this bench has no table; what counts is what the payment hands over).
      const handoffTypes = new Set<string>();
      const handedOver = async () => {
        const keys: string[] = [];
        for (const runId of await runChain(b.env.client, handle.workflowId, firstRunId)) {
          const history = await b.env.client.workflow.getHandle(handle.workflowId, runId).fetchHistory();
          for (const e of history.events ?? []) {
            const scheduled = e.activityTaskScheduledEventAttributes;
            const type = scheduled?.activityType?.name;
            const [input] = (scheduled?.input?.payloads ?? []).map((p) =>
              defaultPayloadConverter.fromPayload<unknown>(p),
            );
            const answers =
              type === 'recordKeyAnswer'
                ? [input as KeyAnswer]
                : type === 'handOverPaymentNews'
                  ? (input as PaymentNews).keyAnswers
                  : [];
            keys.push(...answers.map((answer) => `${answer.operation}:${answer.key}`));
            if (answers.length > 0) handoffTypes.add(type as string);
          }
        }
        return keys;
      };
      const keys = await eventually(
        'every key handed over',
        async () => {
          const got = await handedOver();
          return got.length >= refunds + 1 ? got : undefined;
        },
        20_000,
        200,
      );
      expect(keys.sort()).toEqual(
        [
          `charge:${input.key}`,
          ...Array.from({ length: refunds - 1 }, (_, i) => `refund:r-${i}`),
          'refund:r-last',
        ].sort(),
      );
      expect((await runChain(b.env.client, handle.workflowId, firstRunId)).length).toBeGreaterThan(1);
      expect([...handoffTypes]).toEqual(['merchantEvents' in events ? 'handOverPaymentNews' : 'recordKeyAnswer']);
    });
  },
);

it('an expired customer action whose cancel the provider refuses goes on trying in the next run, until the customer acts', async () => {
  const b = await t.world();
  await b.run(async () => {
    // A wait of half a second, then a cancel every 300 ms: the provider refuses each, and still shows the payment
    // waiting for the customer. Each try adds a void, a look-up and a timer to the history: past the threshold soon.
    const input = b.input(chargeRequest({ paymentMethod: 'pm_3ds_required' }), {
      timings: { customerActionTimeoutMs: 500, reconcileScheduleMs: [300] },
    });
    b.sim.addFaults({ rules: [{ match: { operation: 'void' }, fault: 'status', status: 400 }] });
    const { handle, view } = await startCharge(b, input);
    expect(view.status).toBe('requires_action');
    const firstRunId = (await handle.describe()).runId;
    // Voids scheduled by each run of the chain: the cancel goes on in a run after the one that began it.
    const voidsPerRun = async () => {
      const chain = await runChain(b.env.client, handle.workflowId, firstRunId);
      const counts = [];
      for (const runId of chain) {
        const events = (await b.env.client.workflow.getHandle(handle.workflowId, runId).fetchHistory()).events ?? [];
        counts.push(
          events.filter((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'voidPayment').length,
        );
      }
      return counts;
    };
    const counts = await eventually(
      'cancels in two runs',
      async () => {
        const c = await voidsPerRun();
        return c.filter((n) => n > 0).length >= 2 ? c : undefined;
      },
      30_000,
    );
    expect(counts.length).toBeGreaterThanOrEqual(2);
    expect((await b.env.client.workflow.getHandle(handle.workflowId).query(paymentQuery)).status).toBe(
      'requires_action',
    );
    // The customer completes after all: the next try's refused cancel is followed by a look-up that finds it.
    expect((await b.sim.authenticate(view.providerPaymentId as string, 'succeeded')).status).toBe(200);
    const latest = b.env.client.workflow.getHandle(handle.workflowId);
    const done = await eventually(
      'succeeded',
      async () => {
        const v = await latest.query(paymentQuery);
        return v.status === 'succeeded' ? v : undefined;
      },
      20_000,
    );
    expect(done).toMatchObject({ amountCaptured: 1_000, providerPaymentId: view.providerPaymentId });
    expect(effectsOf(b, 'create')).toHaveLength(1);
    expect(effectsOf(b, 'void')).toHaveLength(0);
    await recordHistories(b, 'customer-action-cancel-refused-continued', [handle.workflowId], firstRunId);
  });
}, 60_000);
