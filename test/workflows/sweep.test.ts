/**
 * The reconcile sweep on the run's shared dev server (visibility and schedules need it), against the real simulator
 * over HTTP and real workers built by src/stack.ts with the sweep's activities. Every test has its own simulator,
 * merchant, task queue and ids; visibility is eventually consistent, so reads of it poll with a deadline.
 */
import { randomUUID } from 'node:crypto';
import { WorkflowNotFoundError } from '@temporalio/client';
import { SearchAttributeType, defineSearchAttributeKey } from '@temporalio/common';
import { loadConfig } from '../../src/config';
import { paymentQuery } from '../../src/domain/definitions';
import { reconcileWorkflowId } from '../../src/domain/ids';
import {
  type ReviewItemState,
  resolveReviewItemUpdate,
  reviewItemQuery,
  reviewItemWorkflowId,
} from '../../src/domain/review-items';
import {
  type SweepInput,
  type SweepResult,
  SweepInput as SweepInputSchema,
  compareWithOurs,
  providerSeconds,
  sweepScheduleId,
  sweepWindow,
} from '../../src/domain/sweep';
import type { ProviderPayment } from '../../src/providers/types';
import { ensureSweepSchedule } from '../../src/schedules';
import { paymentMetadata } from '../../src/workflows/activity-options';
import type { reconcileSweepWorkflow } from '../../src/workflows/sweep';
import { type World, serverPerFile } from '../helpers/world';
import { eventually } from '../helpers/eventually';
import { chargeRequest } from '../helpers/payments';
import { connectDevServer } from '../helpers/servers';
import { hourlySchedule, ourPayment, sweepCutoff, sweepInputOver } from '../helpers/sweeps';
import { startCharge, waitForStatus } from '../helpers/workflows';

// The workers register the sweep's activities, as the worker process does.
const t = serverPerFile(connectDevServer, { sweep: true });
const TemporalScheduledStartTime = defineSearchAttributeKey('TemporalScheduledStartTime', SearchAttributeType.DATETIME);

/** A sweep input over an explicit window around the test (provider clocks have one-second resolution). */
function sweepInput(fromMs: number, over: Partial<SweepInput> = {}): SweepInput {
  return sweepInputOver({ fromMs: fromMs - 2_000, toMs: Date.now() + 2_000 }, over);
}

/** Executes one sweep run directly (no schedule) on the world's task queue; tracks the review items it raised. */
async function runSweep(b: World, input: SweepInput): Promise<SweepResult> {
  const workflowId = `sweep-test:${randomUUID()}`;
  b.track(workflowId);
  const result = await t.env.client.workflow.execute<typeof reconcileSweepWorkflow>('reconcileSweepWorkflow', {
    workflowId,
    taskQueue: b.taskQueue,
    args: [input],
  });
  for (const id of result.reviewItems) b.track(id);
  return result;
}

/** Workflow ids a visibility query matches (one page is plenty for one test's workflows). */
async function visible(query: string): Promise<string[]> {
  const response = await t.env.client.workflowService.listWorkflowExecutions({
    namespace: t.env.namespace ?? 'default',
    query,
    pageSize: 100,
  });
  return response.executions.flatMap((e) => (e.execution?.workflowId ? [e.execution.workflowId] : []));
}

/** Open review items of one order, as an operator finds them in the web UI. */
const openReviewItemsQuery = (reference: string) =>
  `WorkflowType = 'reviewItemWorkflow' AND PaymentStatus = 'needs_review' AND OrderId = '${reference}'`;

/** Waits until visibility shows exactly `ids` for `query`. */
const visibleExactly = (query: string, ids: string[]) =>
  eventually(
    `visibility to show ${JSON.stringify(ids)}`,
    async () => {
      const found = await visible(query);
      return found.length === ids.length && ids.every((id) => found.includes(id)) && found;
    },
    10_000,
    100,
  );

/** Creates a payment at the provider directly: an effect no workflow of ours started. */
async function createAtProvider(
  b: World,
  over: { reference?: string; amount?: number; metadata?: Record<string, string> } = {},
): Promise<ProviderPayment> {
  const result = await b.provider.createPayment(
    {
      amount: over.amount ?? 1_000,
      currency: 'EUR',
      reference: over.reference ?? `order_${randomUUID()}`,
      paymentMethod: 'pm_card_visa',
      capture: 'automatic',
      ...(over.metadata ? { metadata: over.metadata } : {}),
    },
    { idempotencyKey: `direct_${randomUUID()}`, attempt: 1 },
  );
  if (result.outcome === 'declined') throw new Error('the direct charge was declined');
  return result.payment;
}

/** Whether a workflow id exists at all. */
async function exists(workflowId: string): Promise<boolean> {
  try {
    await t.env.client.workflow.getHandle(workflowId).describe();
    return true;
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return false;
    throw err;
  }
}

/** A payment in `unknown` with a live reconcile: provider without keys, the create committed and its answer lost. */
async function unknownPayment(b: World) {
  const input = b.input(chargeRequest(), { timings: { reconcileScheduleMs: [600_000], settleWindowMs: 1_000 } });
  b.sim.addFaults({
    rules: [{ match: { operation: 'create', reference: input.request.orderId }, fault: 'commit_then_drop', times: 1 }],
  });
  const { handle } = await startCharge(b, input);
  await waitForStatus(handle, 'unknown');
  const reconcileId = reconcileWorkflowId(input.merchantId, 'create', input.key);
  b.track(reconcileId);
  const reconcile = t.env.client.workflow.getHandle(reconcileId);
  await eventually(
    'the reconcile child to run',
    async () => (await reconcile.describe()).status.name === 'RUNNING',
    10_000,
    100,
  );
  // The sweep finds stuck payments through visibility: wait until it has indexed this one as unknown.
  await visibleExactly(`TaskQueue = '${b.taskQueue}' AND PaymentStatus = 'unknown'`, [handle.workflowId]);
  const effect = b.ledger().effects.find((e) => e.operation === 'create' && e.reference === input.request.orderId);
  if (!effect) throw new Error('the create was not committed');
  return { input, handle, reconcile, providerPaymentId: effect.payment_id };
}

/** The signal names a workflow received, in order. */
async function signalsOf(workflowId: string): Promise<string[]> {
  const history = await t.env.client.workflow.getHandle(workflowId).fetchHistory();
  return (history.events ?? []).flatMap((e) =>
    e.workflowExecutionSignaledEventAttributes?.signalName
      ? [e.workflowExecutionSignaledEventAttributes.signalName]
      : [],
  );
}

describe('reconcile sweep: payments stuck in unknown', () => {
  it('signals a payment unknown beyond the threshold; its reconcile is live; the provider effect it misses is a disagreement', async () => {
    const b = await t.world({ noKeys: true });
    const fromMs = Date.now();
    await b.run(async () => {
      const { handle, reconcile, providerPaymentId } = await unknownPayment(b);

      // A threshold of 1 ms: this payment has been unknown "too long" already.
      const result = await runSweep(b, sweepInput(fromMs, { unknownThresholdMs: 1 }));

      expect(result).toMatchObject({
        stuckUnknown: 1,
        reconcilesEnsured: 1,
        providerPaymentsChecked: 1,
        orphans: 0,
        // The provider shows the charge our payment still calls unknown, after the whole threshold.
        disagreements: 1,
        reviewItemsStarted: 1,
        reviewItems: [reviewItemWorkflowId('simulator', providerPaymentId)],
        truncated: false,
      });
      expect(await signalsOf(handle.workflowId)).toEqual(['ensureReconcile']);
      // A reconcile was running already: the signal started no second one, and the one there still runs.
      expect((await reconcile.describe()).status.name).toBe('RUNNING');
      expect((await handle.query(paymentQuery)).status).toBe('unknown');
    });
  });

  it('leaves a payment alone while it is unknown for less than the threshold', async () => {
    const b = await t.world({ noKeys: true });
    const fromMs = Date.now();
    await b.run(async () => {
      const { handle } = await unknownPayment(b);
      const result = await runSweep(b, sweepInput(fromMs, { unknownThresholdMs: 3_600_000 }));
      // Neither stuck nor a disagreement: its reconcile has the whole schedule to find the provider's payment.
      expect(result).toMatchObject({
        stuckUnknown: 0,
        reconcilesEnsured: 0,
        providerPaymentsChecked: 1,
        orphans: 0,
        disagreements: 0,
        reviewItems: [],
      });
      expect(await signalsOf(handle.workflowId)).toEqual([]);
    });
  });

  // The charge workflow survives a lost reconcile child (it stays unknown, never failed), so the sweep can restart it.
  it('a lost reconcile (child terminated) is started again by the sweep', async () => {
    const b = await t.world({ noKeys: true });
    const fromMs = Date.now();
    await b.run(async () => {
      const { handle, reconcile } = await unknownPayment(b);
      const lostRunId = (await reconcile.describe()).runId;
      await reconcile.terminate('simulating a lost reconcile');

      const result = await runSweep(b, sweepInput(fromMs, { unknownThresholdMs: 1 }));

      expect(result).toMatchObject({ stuckUnknown: 1, reconcilesEnsured: 1 });
      const again = await eventually(
        'a new reconcile run',
        async () => {
          const d = await t.env.client.workflow.getHandle(reconcile.workflowId).describe();
          return d.runId !== lostRunId && d.status.name === 'RUNNING' && d;
        },
        10_000,
        100,
      );
      expect(again.status.name).toBe('RUNNING');
      expect((await handle.describe()).status.name).toBe('RUNNING');
    });
  });
});

describe('reconcile sweep: provider payments against ours', () => {
  it('flags an orphan charge exactly once, visible as needs_review; a later sweep raises no duplicate; resolved, it stays resolved', async () => {
    const b = await t.world();
    const fromMs = Date.now();
    await b.run(async () => {
      const reference = `order_${randomUUID()}`;
      const orphan = await createAtProvider(b, { reference, amount: 1_234 });
      const itemId = reviewItemWorkflowId('simulator', orphan.id);

      const first = await runSweep(b, sweepInput(fromMs));
      expect(first).toMatchObject({
        stuckUnknown: 0,
        providerPaymentsChecked: 1,
        orphans: 1,
        disagreements: 0,
        reviewItemsStarted: 1,
        reviewItems: [itemId],
      });
      await visibleExactly(openReviewItemsQuery(reference), [itemId]);
      const item: ReviewItemState = await t.env.client.workflow.getHandle(itemId).query(reviewItemQuery);
      expect(item.input).toMatchObject({
        kind: 'orphan',
        orphanReason: 'unmatched',
        provider: 'simulator',
        providerPaymentId: orphan.id,
        reference,
        payment: { id: orphan.id, amount: 1_234, status: 'succeeded' },
      });
      expect(item.resolution).toBeUndefined();

      const second = await runSweep(b, sweepInput(fromMs));
      expect(second).toMatchObject({ orphans: 1, reviewItemsStarted: 0, reviewItems: [itemId] });
      await visibleExactly(openReviewItemsQuery(reference), [itemId]);

      // An operator resolves it: the item completes and leaves the needs_review filter; no sweep raises it again.
      const handle = t.env.client.workflow.getHandle(itemId);
      const resolved = await handle.executeUpdate(resolveReviewItemUpdate, {
        args: [{ action: 'refunded_at_provider', note: 'refunded in the provider dashboard', operator: 'ops-1' }],
      });
      expect(resolved.resolution).toMatchObject({ action: 'refunded_at_provider', operator: 'ops-1' });
      expect((await handle.result()).resolution?.action).toBe('refunded_at_provider');
      await visibleExactly(openReviewItemsQuery(reference), []);
      const third = await runSweep(b, sweepInput(fromMs));
      expect(third).toMatchObject({ orphans: 1, reviewItemsStarted: 0 });
      await visibleExactly(openReviewItemsQuery(reference), []);
    });
  });

  it('flags a disagreement (ours failed, the provider shows it succeeded) and a second charge; a payment that agrees is not flagged', async () => {
    const b = await t.world();
    const fromMs = Date.now();
    await b.run(async () => {
      // Agrees: charged once, succeeded on both sides.
      const agreeing = b.input(chargeRequest());
      const { view: agreed } = await startCharge(b, agreeing);
      expect(agreed.status).toBe('succeeded');

      // Ours failed (the provider refused with a 400), yet the provider holds a payment carrying its metadata.
      const failing = b.input(chargeRequest({ amount: { value: 2_500, currency: 'EUR' } }));
      b.sim.addFaults({
        rules: [
          {
            match: { operation: 'create', reference: failing.request.orderId },
            fault: 'status',
            status: 400,
            times: 1,
          },
        ],
      });
      const { view: failed } = await startCharge(b, failing);
      expect(failed.status).toBe('failed');
      const contradicting = await createAtProvider(b, {
        reference: failing.request.orderId,
        amount: 2_500,
        metadata: paymentMetadata(failing.merchantId, failing.key),
      });

      // A second provider payment for the agreeing payment: a second charge.
      const second = await createAtProvider(b, {
        reference: agreeing.request.orderId,
        metadata: paymentMetadata(agreeing.merchantId, agreeing.key),
      });

      const result = await runSweep(b, sweepInput(fromMs));
      expect(result).toMatchObject({ providerPaymentsChecked: 3, orphans: 1, disagreements: 1, reviewItemsStarted: 2 });
      expect([...result.reviewItems].sort()).toEqual(
        [reviewItemWorkflowId('simulator', contradicting.id), reviewItemWorkflowId('simulator', second.id)].sort(),
      );
      expect(await exists(reviewItemWorkflowId('simulator', agreed.providerPaymentId as string))).toBe(false);

      const disagreement = await t.env.client.workflow
        .getHandle(reviewItemWorkflowId('simulator', contradicting.id))
        .query(reviewItemQuery);
      expect(disagreement.input).toMatchObject({
        kind: 'disagreement',
        merchantId: failing.merchantId,
        ours: { status: 'failed', amount: 2_500, currency: 'EUR' },
      });
      const secondCharge = await t.env.client.workflow
        .getHandle(reviewItemWorkflowId('simulator', second.id))
        .query(reviewItemQuery);
      expect(secondCharge.input).toMatchObject({
        kind: 'orphan',
        orphanReason: 'second_charge',
        merchantId: agreeing.merchantId,
      });
      // Operators find both under the merchant's needs_review filter.
      await visibleExactly(
        `WorkflowType = 'reviewItemWorkflow' AND PaymentStatus = 'needs_review' AND MerchantId = '${b.merchantId}'`,
        [reviewItemWorkflowId('simulator', contradicting.id), reviewItemWorkflowId('simulator', second.id)],
      );
    });
  });
});

describe("reconcile sweep: the worker's retry presets", () => {
  it('lists the provider with the retry overrides the worker gives its charges (RETRY_LIST_*), not the built-in preset', async () => {
    const b = await t.world();
    const fromMs = Date.now();
    const retry = { list: { maximumAttempts: 7, attemptTimeoutMs: 12_345, initialIntervalMs: 1_500 } };
    await b.run(async () => {
      const workflowId = `sweep-test:${randomUUID()}`;
      b.track(workflowId);
      await t.env.client.workflow.execute<typeof reconcileSweepWorkflow>('reconcileSweepWorkflow', {
        workflowId,
        taskQueue: b.taskQueue,
        args: [sweepInput(fromMs, { retry })],
      });
      const history = await t.env.client.workflow.getHandle(workflowId).fetchHistory();
      const lists = (history.events ?? []).flatMap((e) => {
        const a = e.activityTaskScheduledEventAttributes;
        return a?.activityType?.name === 'listProviderPayments' ? [a] : [];
      });
      expect(lists.length).toBeGreaterThan(0);
      for (const a of lists) {
        expect(a.retryPolicy?.maximumAttempts).toBe(7);
        expect(Number(a.startToCloseTimeout?.seconds)).toBe(12); // 12.345 s
        expect(Number(a.retryPolicy?.initialInterval?.seconds)).toBe(1); // 1.5 s
      }
    });
  });

  it("the schedule carries the worker's retry overrides to every run", async () => {
    const b = await t.world();
    const retry = { lookup: { maximumAttempts: 4 } };
    const opts = { ...hourlySchedule(b.taskQueue), retry, scheduleId: `sweep-retry-test:${randomUUID()}` };
    const handle = t.env.client.schedule.getHandle(opts.scheduleId);
    try {
      expect(await ensureSweepSchedule(t.env.client, opts)).toMatchObject({ outcome: 'created' });
      expect((await handle.describe()).action.args).toEqual([expect.objectContaining({ retry })]);
      // A deploy that changes the presets updates the schedule.
      const changed = { lookup: { maximumAttempts: 5 } };
      expect(await ensureSweepSchedule(t.env.client, { ...opts, retry: changed })).toMatchObject({
        outcome: 'updated',
      });
      expect((await handle.describe()).action.args).toEqual([expect.objectContaining({ retry: changed })]);
    } finally {
      await handle.delete();
    }
  });
});

describe('ensureSweepSchedule', () => {
  it('creates one schedule, leaves it on a repeat, updates it (keeping it paused) on a new interval; a trigger runs the sweep', async () => {
    const b = await t.world();
    const opts = hourlySchedule(b.taskQueue);
    const scheduleId = sweepScheduleId(b.taskQueue);
    const handle = t.env.client.schedule.getHandle(scheduleId);
    try {
      expect(await ensureSweepSchedule(t.env.client, opts)).toEqual({ scheduleId, outcome: 'created' });
      expect(await ensureSweepSchedule(t.env.client, opts)).toEqual({ scheduleId, outcome: 'unchanged' });
      const described = await handle.describe();
      expect(described.spec.intervals?.map((i) => i.every)).toEqual([3_600_000]);
      expect(described.policies.overlap).toBe('SKIP');
      expect(described.action).toMatchObject({
        workflowType: 'reconcileSweepWorkflow',
        workflowId: scheduleId,
        taskQueue: b.taskQueue,
        args: [{ providers: ['simulator'], intervalMs: 3_600_000, lookbackMs: 0, unknownThresholdMs: 3_600_000 }],
      });
      expect(described.info.numActionsTaken).toBe(0);

      await handle.pause('paused by an operator');
      expect(await ensureSweepSchedule(t.env.client, { ...opts, intervalMs: 1_800_000 })).toEqual({
        scheduleId,
        outcome: 'updated',
      });
      const updated = await handle.describe();
      expect(updated.spec.intervals?.map((i) => i.every)).toEqual([1_800_000]);
      expect(updated.action.args).toEqual([expect.objectContaining({ intervalMs: 1_800_000 })]);
      expect(updated.state).toMatchObject({ paused: true, note: 'paused by an operator' });
      await handle.unpause();

      // The triggered run derives its window from its own time: the orphan created a second before is in it.
      const orphan = await createAtProvider(b);
      await new Promise((r) => setTimeout(r, 1_100)); // provider times are whole seconds; the window's end is exclusive
      await b.run(async () => {
        const triggeredAt = Date.now();
        await handle.trigger();
        const workflowId = await eventually(
          'the schedule to start a run',
          async () => (await handle.describe()).info.recentActions[0]?.action.workflow.workflowId,
          10_000,
          100,
        );
        b.track(workflowId);
        expect(workflowId.startsWith(`${scheduleId}-`)).toBe(true);
        const result: SweepResult = await t.env.client.workflow.getHandle(workflowId).result();
        for (const id of result.reviewItems) b.track(id);
        expect(result).toMatchObject({
          providerPaymentsChecked: 1,
          orphans: 1,
          reviewItems: [reviewItemWorkflowId('simulator', orphan.id)],
        });
        // Anchored on the time the schedule set for the run (whole seconds), not on when the run happened to start.
        const scheduledAt = (await t.env.client.workflow.getHandle(workflowId).describe()).typedSearchAttributes.get(
          TemporalScheduledStartTime,
        );
        expect(result.window.toMs).toBe(scheduledAt?.getTime());
        expect(Math.abs(result.window.toMs - triggeredAt)).toBeLessThan(5_000);
        expect(result.window.toMs - result.window.fromMs).toBe(2 * 1_800_000);
      });
    } finally {
      await handle.delete();
    }
  });
});

describe('sweep rules (pure)', () => {
  const ours = ourPayment;
  const theirs = { id: 'pay_1', status: 'succeeded', amount: 1_000, currency: 'EUR' } as const;
  const cutoff = sweepCutoff;

  it('compares the creation only', () => {
    expect(compareWithOurs(ours(), theirs, cutoff).kind).toBe('agrees');
    expect(compareWithOurs(ours({ status: 'authorized' }), theirs, cutoff).kind).toBe('agrees');
    expect(compareWithOurs(ours(), { ...theirs, id: 'pay_2' }, cutoff)).toMatchObject({
      kind: 'orphan',
      reason: 'second_charge',
    });
    expect(compareWithOurs(ours(), { ...theirs, amount: 999 }, cutoff).kind).toBe('disagreement');
    const none = { providerPaymentId: undefined } as const;
    for (const status of ['failed', 'declined'] as const)
      expect(compareWithOurs(ours({ ...none, status }), theirs, cutoff).kind).toBe('disagreement');
    expect(compareWithOurs(ours({ ...none, status: 'failed' }), { ...theirs, status: 'voided' }, cutoff).kind).toBe(
      'agrees',
    );
    expect(compareWithOurs(ours({ ...none, status: 'needs_review' }), theirs, cutoff).kind).toBe('in_review');
    const unknownSince = (iso: string) => ours({ ...none, status: 'unknown', unknownSince: iso });
    expect(compareWithOurs(unknownSince('2030-01-01T00:30:00.000Z'), theirs, cutoff).kind).toBe('disagreement');
    expect(compareWithOurs(unknownSince('2030-01-01T01:30:00.000Z'), theirs, cutoff).kind).toBe('reconciling');
  });

  it('derives adjacent, overlapping windows from the scheduled time', () => {
    const input = SweepInputSchema.parse({
      providers: ['simulator'],
      intervalMs: 600_000,
      lookbackMs: 120_000,
      unknownThresholdMs: 3_600_000,
    });
    const t = Date.parse('2030-01-01T00:10:00.000Z');
    expect(sweepWindow(input, t)).toEqual({ fromMs: t - 120_000 - 1_200_000, toMs: t - 120_000 });
    // The next run's window starts one interval later and overlaps this one by an interval.
    expect(sweepWindow(input, t + 600_000).fromMs).toBe(t - 120_000 - 600_000);
    expect(providerSeconds({ fromMs: 1_999, toMs: 5_000 })).toEqual({ createdGte: 1, createdLt: 5 });
    expect(() => SweepInputSchema.parse({ ...input, window: { fromMs: 2, toMs: 1 } })).toThrow();
  });

  it('reads SWEEP_INTERVAL_MS and SWEEP_LOOKBACK_MS (default: twice the settle window, never below it)', () => {
    expect(loadConfig({})).toMatchObject({ SWEEP_INTERVAL_MS: 600_000, SWEEP_LOOKBACK_MS: 120_000 });
    expect(loadConfig({ SETTLE_WINDOW_MS: '5000', SWEEP_INTERVAL_MS: '60000' })).toMatchObject({
      SWEEP_INTERVAL_MS: 60_000,
      SWEEP_LOOKBACK_MS: 10_000,
    });
    expect(() => loadConfig({ SETTLE_WINDOW_MS: '5000', SWEEP_LOOKBACK_MS: '4000' })).toThrow(/SWEEP_LOOKBACK_MS/);
    expect(() => loadConfig({ SWEEP_INTERVAL_MS: '500' })).toThrow(/SWEEP_INTERVAL_MS/);
  });
});
