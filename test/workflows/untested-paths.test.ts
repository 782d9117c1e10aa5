/**
 * Money paths after the create call that no other test touched (issue: tests that can fail on what they name), on the
 * time-skipping server against the real simulator over HTTP: the key-lifetime guard of a reconcile resubmission, a
 * capture racing the authorization-expiry void, and a resubmission answered with a decline or a 4xx. The simulator's
 * ledger is the witness; the histories show the racers overlapped.
 */
import { paymentQuery } from '../../src/domain/definitions';
import { reconcileWorkflowId } from '../../src/domain/ids';
import type { RetryOverrides } from '../../src/domain/retry';
import type { ChargeWorkflowInput } from '../../src/domain/workflow-inputs';
import { type World, timeSkippingServerPerTest } from '../helpers/world';
import { chargeRequest } from '../helpers/payments';
import { capture } from '../helpers/requests';
import { effectsOf, requestsOf, startCharge, waitForStatus } from '../helpers/workflows';

const t = timeSkippingServerPerTest();

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

/** Creates that end unknown within seconds: two attempts, each reset (or dropped) by the simulator. */
const shortCreate: RetryOverrides['create'] = {
  initialIntervalMs: 100,
  maximumIntervalMs: 200,
  attemptTimeoutMs: 3_000,
  budgetMs: 30_000,
  maximumAttempts: 2,
};

/** The createPayment activities a reconcile scheduled: its resubmissions. */
async function resubmissionsOf(input: ChargeWorkflowInput): Promise<number> {
  const history = await t.env.client.workflow
    .getHandle(reconcileWorkflowId(input.merchantId, 'create', input.key))
    .fetchHistory();
  return (history.events ?? []).filter(
    (e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'createPayment',
  ).length;
}

describe('the key-lifetime guard of a reconcile resubmission', () => {
  // The first check comes 10 s before the key's 2 h lifetime ends: the key is (about) still alive, but a resend with
  // a 30 s create budget could land after the provider forgot it, where a committed first request would be charged
  // again. Everything else is the same in both tests: only the key lifetime differs.
  const timings = { settleWindowMs: 30 * 60_000, reconcileScheduleMs: [2 * HOUR - 10_000, HOUR] };

  async function neverCommittedCharge(b: World) {
    const input = b.input(chargeRequest(), { timings, retry: { create: shortCreate } });
    // Every create is reset after it was sent: the client cannot know whether it committed.
    b.sim.addFaults({
      rules: [{ match: { operation: 'create', reference: input.request.orderId }, fault: 'reset_before_commit' }],
    });
    const { handle } = await startCharge(b, input);
    await waitForStatus(handle, 'unknown');
    const createsBeforeReconcile = requestsOf(b, 'create').length;
    await t.env.sleep(3 * HOUR + 60_000);
    const review = await waitForStatus(handle, 'needs_review');
    return { input, review, createsBeforeReconcile };
  }

  it('never resubmits once the provider may have forgotten the key: no create request after the first attempts', async () => {
    const b = await t.world({ keyTtlS: 2 * 3_600 });
    await b.run(async () => {
      const { input, review, createsBeforeReconcile } = await neverCommittedCharge(b);
      expect(createsBeforeReconcile).toBeGreaterThanOrEqual(1);
      // The ledger is the witness: nothing was sent after the first create's own attempts.
      expect(requestsOf(b, 'create')).toHaveLength(createsBeforeReconcile);
      expect(await resubmissionsOf(input)).toBe(0);
      expect(review.review?.reason).toBe(
        'create not found at simulator after 2 checks over 3 h: 2 look-ups found nothing',
      );
      expect(effectsOf(b, 'create')).toHaveLength(0);
    });
  });

  it('control: the same unknown charge with a key that outlives the schedule is resubmitted at each check, under one key', async () => {
    const b = await t.world({ keyTtlS: 86_400 });
    await b.run(async () => {
      const { input, review, createsBeforeReconcile } = await neverCommittedCharge(b);
      // A resubmission per check (its own attempts are reset too, so each may send more than one request, all under
      // one key).
      expect(requestsOf(b, 'create').length).toBeGreaterThan(createsBeforeReconcile);
      expect(await resubmissionsOf(input)).toBe(2);
      expect(new Set(requestsOf(b, 'create').map((r) => r.idempotency_key)).size).toBe(1);
      expect(review.review?.reason).toBe(
        'create not found at simulator after 2 checks over 3 h: 2 look-ups found nothing; ' +
          '2 resubmissions with the same key were sent, their outcomes unknown',
      );
    });
  });
});

describe('a capture racing the authorization-expiry void', () => {
  it('the void waits for the unknown capture’s reconcile: the capture is found, no void request is ever sent', async () => {
    const b = await t.world();
    await b.run(async () => {
      const input = b.input(chargeRequest({ capture: 'manual' }), {
        timings: { authorizationExpiryMs: DAY, reconcileScheduleMs: [2 * DAY, DAY] },
        retry: {
          capture: {
            initialIntervalMs: 100,
            maximumIntervalMs: 200,
            attemptTimeoutMs: 5_000,
            budgetMs: 10_000,
            maximumAttempts: 2,
          },
        },
      });
      const { handle, view } = await startCharge(b, input);
      expect(view.status).toBe('authorized');
      // The capture commits at the provider, but every answer (the retry's replay too) is lost: outcome unknown.
      b.sim.addFaults({ rules: [{ match: { operation: 'capture' }, fault: 'commit_then_drop' }] });
      const answered = await capture(handle, { captureKey: 'c-race', fingerprint: 'f' });
      expect(answered.status).toBe('authorized');
      expect(answered.operations).toEqual([expect.objectContaining({ kind: 'capture', state: 'running' })]);
      expect(effectsOf(b, 'capture')).toHaveLength(1);

      // The expiry timer fires while the capture's reconcile still waits for its first check (at 2 days).
      await t.env.sleep(DAY + HOUR);
      const atExpiry = await handle.query(paymentQuery);
      expect(requestsOf(b, 'void')).toHaveLength(0);
      expect(atExpiry.status).toBe('authorized');

      await t.env.sleep(DAY);
      const settled = await waitForStatus(handle, 'succeeded');
      expect(settled).toMatchObject({ amountCaptured: 1_000, amountAuthorized: 1_000 });
      expect(settled.operations).toEqual([expect.objectContaining({ kind: 'capture', state: 'succeeded' })]);
      expect(requestsOf(b, 'void')).toHaveLength(0);
      expect(effectsOf(b, 'void')).toHaveLength(0);

      // The racers overlapped: the expiry timer fired before the capture's reconcile completed.
      const events = (await handle.fetchHistory()).events ?? [];
      const expiryFired = events.findIndex((e) => e.timerFiredEventAttributes);
      const reconcileDone = events.findIndex(
        (e) =>
          e.childWorkflowExecutionCompletedEventAttributes?.workflowExecution?.workflowId ===
          reconcileWorkflowId(input.merchantId, 'capture', 'c-race'),
      );
      expect(expiryFired).toBeGreaterThan(-1);
      expect(reconcileDone).toBeGreaterThan(expiryFired);
    });
  });
});

describe('a reconcile resubmission answered by the provider', () => {
  const timings = { settleWindowMs: 30 * 60_000, reconcileScheduleMs: [HOUR, HOUR] };

  /** A charge whose first create attempts are all reset before commit, left `unknown` with its reconcile waiting. */
  async function unknownCharge(b: World, paymentMethod: string) {
    const input = b.input(chargeRequest({ paymentMethod }), { timings, retry: { create: shortCreate } });
    b.sim.addFaults({
      rules: [{ match: { operation: 'create', reference: input.request.orderId }, fault: 'reset_before_commit' }],
    });
    const { handle } = await startCharge(b, input);
    await waitForStatus(handle, 'unknown');
    b.sim.clearFaults();
    return { input, handle, createsBefore: requestsOf(b, 'create').length };
  }

  it('with a decline: the payment ends declined with the decline code, after exactly one resubmission', async () => {
    const b = await t.world();
    await b.run(async () => {
      const { input, handle, createsBefore } = await unknownCharge(b, 'pm_decline_insufficient_funds');
      await t.env.sleep(HOUR + 60_000);
      const declined = await waitForStatus(handle, 'declined');
      expect(declined.declineCode).toBe('insufficient_funds');
      expect(declined.review).toBeUndefined();
      const creates = requestsOf(b, 'create');
      expect(creates).toHaveLength(createsBefore + 1);
      expect(creates.at(-1)).toMatchObject({ status: 402, idempotency_key: creates[0]?.idempotency_key });
      expect(await resubmissionsOf(input)).toBe(1);
      expect(effectsOf(b, 'create')).toHaveLength(0);
      expect((await handle.result()).status).toBe('declined');
    });
  });

  // A 401 says nothing about what the first, unknown, request did (issue 8 defect 9): only an answer about the key's
  // effect decides, so the reconcile keeps checking, and resubmits under the same key at the next check.
  it('with a 401: still unknown after the resubmission; the next check resubmits and the create is made once', async () => {
    const b = await t.world();
    await b.run(async () => {
      const { input, handle, createsBefore } = await unknownCharge(b, 'pm_card_visa');
      b.sim.addFaults({
        rules: [
          { match: { operation: 'create', reference: input.request.orderId }, fault: 'status', status: 401, times: 1 },
        ],
      });
      await t.env.sleep(2 * HOUR + 60_000);
      const view = await waitForStatus(handle, 'succeeded');
      expect(view.review).toBeUndefined();
      const creates = requestsOf(b, 'create');
      expect(creates).toHaveLength(createsBefore + 2);
      expect(creates.at(-2)).toMatchObject({ status: 401, fault: 'status' });
      expect(new Set(creates.map((r) => r.idempotency_key)).size).toBe(1);
      expect(await resubmissionsOf(input)).toBe(2);
      expect(effectsOf(b, 'create')).toHaveLength(1);
      const reconcile = t.env.client.workflow.getHandle(reconcileWorkflowId(input.merchantId, 'create', input.key));
      expect(await reconcile.result()).toMatchObject({ outcome: 'found', via: 'resubmit', checks: 2 });
    });
  });
});
