/**
 * A reconcile outlives a provider outage longer than its look-up budget: a look-up that failed is a check that learned
 * nothing, the reconcile waits and checks again, and only once the provider's key lifetime is over does it end in
 * review, with a reason that says the look-ups failed. Its review reasons say what was sent and what was refused here
 * before sending. On the time-skipping server against the real simulator over HTTP; the outage is the simulator
 * answering 503 to every look-up.
 */
import { InMemoryCircuitBreaker } from '../../src/breaker';
import { reconcileWorkflowId } from '../../src/domain/ids';
import type { ReconcileResult } from '../../src/domain/operations';
import type { RetryOverrides } from '../../src/domain/retry';
import type { ChargeWorkflowInput } from '../../src/domain/workflow-inputs';
import { paymentQuery } from '../../src/domain/definitions';
import { type World, timeSkippingServerPerTest } from '../helpers/world';
import { opOf, waitForOperation } from '../helpers/operations';
import { chargeRequest, idOf } from '../helpers/payments';
import { capture } from '../helpers/requests';
import { effectsOf, recordHistories, requestsOf, startCharge, waitForStatus } from '../helpers/workflows';

const t = timeSkippingServerPerTest();

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;

/** Writes that end unknown within seconds, and look-ups that give up after a minute (shorter than every outage here). */
const retry: RetryOverrides = {
  create: {
    initialIntervalMs: 100,
    maximumIntervalMs: 200,
    attemptTimeoutMs: 4_000,
    budgetMs: 10_000,
    maximumAttempts: 2,
  },
  capture: {
    initialIntervalMs: 100,
    maximumIntervalMs: 200,
    attemptTimeoutMs: 4_000,
    budgetMs: 10_000,
    maximumAttempts: 2,
  },
  lookup: { initialIntervalMs: 1_000, maximumIntervalMs: 10_000, budgetMs: MINUTE },
};

/** The provider answers 503 to every look-up until `end()`. */
function lookupOutage(b: World) {
  b.sim.addFaults({ rules: [{ match: { operation: 'lookup' }, fault: 'status', status: 503 }] });
  return { end: () => b.sim.clearFaults() };
}

/** The look-up activities of a reconcile that failed (their budget spent): outages it outlived. */
async function failedLookups(workflowId: string): Promise<number> {
  const history = await t.env.client.workflow.getHandle(workflowId).fetchHistory();
  const lookups = new Set(
    (history.events ?? [])
      .filter((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'lookupPayment')
      .map((e) => String(e.eventId)),
  );
  return (history.events ?? []).filter((e) => {
    const ended = e.activityTaskFailedEventAttributes ?? e.activityTaskTimedOutEventAttributes;
    return ended && lookups.has(String(ended.scheduledEventId));
  }).length;
}

/** A reconcile's waits (its timers, in minutes) and when its look-up that answered completed (server time). */
async function checkTimeline(workflowId: string): Promise<{ waitsMin: number[]; foundAtMs: number }> {
  const events = (await t.env.client.workflow.getHandle(workflowId).fetchHistory()).events ?? [];
  const waitsMin = events.flatMap((e) => {
    const timeout = e.timerStartedEventAttributes?.startToFireTimeout;
    return timeout ? [Number(timeout.seconds ?? 0) / 60] : [];
  });
  const found = events.filter((e) => e.activityTaskCompletedEventAttributes).at(-1);
  const at = found?.eventTime;
  return { waitsMin, foundAtMs: at ? Number(at.seconds ?? 0) * 1000 + Math.floor((at.nanos ?? 0) / 1e6) : NaN };
}

/** A charge whose create committed at the provider but whose every answer was lost: unknown, its reconcile waiting. */
async function unknownCharge(b: World, timings: Partial<ChargeWorkflowInput['timings']>) {
  const input = b.input(chargeRequest(), { retry, timings });
  b.sim.addFaults({
    rules: [{ match: { operation: 'create', reference: input.request.orderId }, fault: 'commit_then_drop' }],
  });
  const { handle } = await startCharge(b, input);
  await waitForStatus(handle, 'unknown');
  b.sim.clearFaults();
  return { input, handle, reconcileId: reconcileWorkflowId(input.merchantId, 'create', input.key) };
}

describe('a reconcile through a provider outage', () => {
  it('the look-ups fail for longer than their budget, then the provider is back: the create is found, succeeded', async () => {
    const b = await t.world();
    await b.run(async () => {
      // No resubmission in the window: the look-ups alone must find it.
      const { input, handle, reconcileId } = await unknownCharge(b, {
        reconcileScheduleMs: [MINUTE, HOUR],
        settleWindowMs: 2 * HOUR,
      });
      const outage = lookupOutage(b);
      await t.env.sleep(MINUTE + 3 * MINUTE); // the first check, and its whole look-up budget, inside the outage
      expect(await failedLookups(reconcileId)).toBe(1);
      outage.end();
      await t.env.sleep(HOUR);
      const view = await waitForStatus(handle, 'succeeded');
      expect(view.providerPaymentId).toBe(effectsOf(b, 'create')[0]?.payment_id);
      expect(effectsOf(b, 'create')).toHaveLength(1);
      expect(requestsOf(b, 'lookup').filter((r) => r.status === 503).length).toBeGreaterThan(1);
      const result = (await t.env.client.workflow.getHandle(reconcileId).result()) as ReconcileResult;
      expect(result).toMatchObject({ outcome: 'found', via: 'lookup', checks: 2 });
      await recordHistories(b, 'reconcile-through-outage', [idOf(input), reconcileId]);
    });
  });

  it('a provider back after a long outage is checked within the schedule’s longest wait, not after doubled waits', async () => {
    // Past the schedule the waits double no further than its longest (1 h here): the provider, back after 10 h of
    // failed look-ups, is checked within the hour. Doubling without that bound checked at ~1 min, 1 h, 3 h, 7 h, 15 h:
    // the payment stayed unknown 5 h after the provider was back.
    const b = await t.world({ keyTtlS: 31 * 24 * 3_600 });
    await b.run(async () => {
      const { input, handle, reconcileId } = await unknownCharge(b, {
        reconcileScheduleMs: [MINUTE, HOUR],
        settleWindowMs: 40 * 24 * HOUR, // no resubmission: the look-ups alone must find it
      });
      const outage = lookupOutage(b);
      await t.env.sleep(10 * HOUR);
      outage.end();
      const backAtMs = await t.env.currentTimeMs();
      await t.env.sleep(HOUR + 5 * MINUTE);
      expect((await handle.query(paymentQuery)).status).toBe('succeeded');
      const result = (await t.env.client.workflow.getHandle(reconcileId).result()) as ReconcileResult;
      expect(result).toMatchObject({ outcome: 'found', via: 'lookup' });
      // Every check but the last failed, and each wait past the schedule's two was its longest, never doubled. The
      // waits are read from the history, not counted against the server's clock: one CI run (2026-12-05) saw 7 checks
      // in the 10 h where this machine sees 11, the time-skipping server's clock having moved on between checks.
      const timeline = await checkTimeline(reconcileId);
      expect(await failedLookups(reconcileId)).toBe(result.checks - 1);
      expect(result.checks).toBeGreaterThanOrEqual(4);
      expect(timeline.waitsMin).toEqual([1, 60, ...Array<number>(result.checks - 2).fill(60)]);
      // Found within the longest wait (and one failed look-up's budget) of the provider's return.
      expect(timeline.foundAtMs - backAtMs).toBeLessThanOrEqual(HOUR + 2 * MINUTE);
      expect(effectsOf(b, 'create')).toHaveLength(1);
      await recordHistories(b, 'reconcile-wait-cap', [idOf(input), reconcileId]);
    });
  }, 120_000);

  it('the outage outlasts the provider’s key lifetime: review, and the reason says the look-ups failed', async () => {
    const b = await t.world({ keyTtlS: 6 * 3_600 });
    await b.run(async () => {
      const { handle, reconcileId } = await unknownCharge(b, {
        reconcileScheduleMs: [MINUTE, HOUR],
        settleWindowMs: 2 * HOUR,
      });
      lookupOutage(b);
      await t.env.sleep(7 * HOUR);
      const review = await waitForStatus(handle, 'needs_review', 60_000);
      const checks = (await t.env.client.workflow.getHandle(reconcileId).result()) as ReconcileResult;
      // Past its schedule (two checks) it went on checking until the key lifetime (6 h after the first send) ended.
      expect(checks.checks).toBeGreaterThan(2);
      expect(await failedLookups(reconcileId)).toBe(checks.checks);
      expect(review.review?.reason).toBe(
        `create not confirmed at simulator after ${checks.checks} checks over 6 h: ` +
          `${checks.checks} look-ups failed (ProviderUnavailable), the last at the end of the provider's key lifetime`,
      );
      expect(effectsOf(b, 'create')).toHaveLength(1); // there all along: an operator finds it
    });
  }, 120_000);

  it('a capture whose look-ups fail for longer than their budget is found once the provider is back, not reviewed', async () => {
    const b = await t.world();
    await b.run(async () => {
      const input = b.input(chargeRequest({ capture: 'manual' }), {
        retry,
        timings: { reconcileScheduleMs: [MINUTE, HOUR] },
      });
      const { handle } = await startCharge(b, input);
      b.sim.addFaults({ rules: [{ match: { operation: 'capture' }, fault: 'commit_then_drop' }] });
      const view = await capture(handle, { captureKey: 'c-dark', fingerprint: 'f' });
      expect(opOf(view, 'capture', 'c-dark')?.state).toBe('running');
      b.sim.clearFaults();
      const outage = lookupOutage(b);
      await t.env.sleep(MINUTE + 3 * MINUTE);
      expect(await failedLookups(reconcileWorkflowId(input.merchantId, 'capture', 'c-dark'))).toBe(1);
      outage.end();
      await t.env.sleep(HOUR);
      const found = await waitForOperation(handle, 'capture', 'c-dark', 'succeeded');
      expect(found).toMatchObject({ status: 'succeeded', amountCaptured: 1_000 });
      expect(effectsOf(b, 'capture')).toHaveLength(1);
    });
  });
});

describe('a resubmission refused here through an outage', () => {
  /** A breaker opened by one failure for an hour, on a clock the test moves on (its worker runs in real time). */
  function skewedBreaker() {
    const skew = { ms: 0 };
    const breaker = new InMemoryCircuitBreaker({
      failureThreshold: 1,
      cooldownMs: HOUR,
      now: () => Date.now() + skew.ms,
    });
    return { breaker, skew };
  }

  /** A create reset after it was sent (never committed, the client cannot know): unknown, its reconcile waiting. */
  async function resetCreate(b: World) {
    const input = b.input(chargeRequest(), {
      retry,
      timings: { reconcileScheduleMs: [MINUTE, HOUR], settleWindowMs: 30_000 },
    });
    b.sim.addFaults({
      rules: [{ match: { operation: 'create', reference: input.request.orderId }, fault: 'reset_before_commit' }],
    });
    const { handle } = await startCharge(b, input);
    await waitForStatus(handle, 'unknown');
    return { input, handle, sent: requestsOf(b, 'create').length };
  }

  it('still refused when the schedule ends, it is tried again past it: once the breaker lets it out the create is made, not reviewed', async () => {
    const { breaker, skew } = skewedBreaker();
    const b = await t.world({ breaker });
    await b.run(async () => {
      const { input, handle, sent } = await resetCreate(b);
      b.sim.clearFaults(); // the provider is healthy again, but the breaker does not know it yet
      await breaker.record('simulator', 'ProviderUnavailable');
      // Past the schedule's two checks (1 min, 1 h): both look-ups found nothing, both resubmissions were refused here.
      await t.env.sleep(2 * HOUR);
      const waiting = await handle.query(paymentQuery);
      expect(waiting.status).toBe('unknown'); // before: needs_review at the end of the schedule
      expect(requestsOf(b, 'create')).toHaveLength(sent);
      skew.ms = 2 * HOUR; // the breaker's hour is over: the next write is its probe
      await t.env.sleep(2 * HOUR);
      const view = await waitForStatus(handle, 'succeeded');
      expect(requestsOf(b, 'create')).toHaveLength(sent + 1); // the resubmission, once
      expect(effectsOf(b, 'create')).toHaveLength(1);
      expect(view.providerPaymentId).toBe(effectsOf(b, 'create')[0]?.payment_id);
      const reconcileId = reconcileWorkflowId(input.merchantId, 'create', input.key);
      const result = (await t.env.client.workflow.getHandle(reconcileId).result()) as ReconcileResult;
      expect(result).toMatchObject({ outcome: 'found', via: 'resubmit', checks: 3 });
      await recordHistories(b, 'reconcile-resubmits-through-outage', [idOf(input), reconcileId]);
    });
  });

  it('refused until the key lifetime leaves no room for one more: review, and the reason says how often and until when', async () => {
    const { breaker } = skewedBreaker();
    const b = await t.world({ breaker, keyTtlS: 12 * 3_600 });
    await b.run(async () => {
      const { input, handle, sent } = await resetCreate(b);
      await breaker.record('simulator', 'ProviderUnavailable'); // and it stays open: its clock never moves on
      await t.env.sleep(13 * HOUR);
      const review = await waitForStatus(handle, 'needs_review', 60_000);
      expect(requestsOf(b, 'create')).toHaveLength(sent); // no resubmission ever left
      const reconcileId = reconcileWorkflowId(input.merchantId, 'create', input.key);
      const { checks } = (await t.env.client.workflow.getHandle(reconcileId).result()) as ReconcileResult;
      // 1 min, 1 h (the schedule), then every hour (its longest wait: no doubling past it) until 11 h 1 min, and the
      // last one a minute before a write's budget would outlive the key (12 h).
      expect(checks).toBe(13);
      expect(review.review?.reason).toMatch(
        /^create not found at simulator after 13 checks over \d+ h: 13 look-ups found nothing; the resubmission with the same key was refused here before sending 13 times \(breaker_open\), the last as late as the provider's key lifetime allows: nothing was sent$/,
      );
      expect(review.attempts).toBe(sent);
    });
  });
});
