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
import { timeSkippingServerPerTest } from '../helpers/rigs';
import { opOf, waitForOperation } from '../helpers/operations';
import { type Rig, chargeRequest, idOf } from '../helpers/payments';
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
function lookupOutage(b: Rig) {
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

/** A charge whose create committed at the provider but whose every answer was lost: unknown, its reconcile waiting. */
async function unknownCharge(b: Rig, timings: Partial<ChargeWorkflowInput['timings']>) {
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
    const b = await t.rig();
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

  it('the outage outlasts the provider’s key lifetime: review, and the reason says the look-ups failed', async () => {
    const b = await t.rig({ keyTtlS: 6 * 3_600 });
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
    const b = await t.rig();
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

describe('what a review reason says', () => {
  it('a resubmission refused by the open breaker is said to be refused here, nothing sent; the wait in readable units', async () => {
    const breaker = new InMemoryCircuitBreaker({ failureThreshold: 1, cooldownMs: HOUR });
    const b = await t.rig({ breaker });
    await b.run(async () => {
      const input = b.input(chargeRequest(), {
        retry,
        timings: { reconcileScheduleMs: [MINUTE, HOUR], settleWindowMs: 30_000 },
      });
      // Never committed, and the client cannot know: every create is reset after it was sent.
      b.sim.addFaults({
        rules: [{ match: { operation: 'create', reference: input.request.orderId }, fault: 'reset_before_commit' }],
      });
      const { handle } = await startCharge(b, input);
      await waitForStatus(handle, 'unknown');
      const sent = requestsOf(b, 'create').length;
      // The provider is failing: the breaker opens, so the reconcile's resubmission is refused before it leaves.
      await breaker.record('simulator', 'ProviderUnavailable');
      await t.env.sleep(2 * HOUR);
      const review = await waitForStatus(handle, 'needs_review');
      expect(requestsOf(b, 'create')).toHaveLength(sent); // the resubmission never left
      expect(review.review?.reason).toBe(
        'create not found at simulator after 2 checks over 1 h: 2 look-ups found nothing; ' +
          'the resubmission with the same key was refused here before sending (breaker_open): nothing was sent',
      );
      expect(review.attempts).toBe(sent);
    });
  });
});
