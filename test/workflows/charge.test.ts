/**
 * The charge workflow on the time-skipping server, against the real simulator over HTTP: the retry-contract
 * scenarios, unknown outcomes that reconcile over skipped hours, and reviews. Each scenario records its histories
 * (RECORD_HISTORIES=1) for the replay test.
 */
import { WorkflowUpdateStage } from '@temporalio/client';
import { paymentQuery, submitUpdate, webhookSignal } from '../../src/domain/definitions';
import { ErrorType } from '../../src/domain/errors';
import { reconcileWorkflowId } from '../../src/domain/ids';
import type { reconcileWorkflow } from '../../src/workflows/reconcile';
import type { chargeWorkflow } from '../../src/workflows';
import { timeSkippingServerPerTest } from '../helpers/world';
import { chargeRequest, idOf } from '../helpers/payments';
import { refusalType, resolve } from '../helpers/requests';
import {
  effectsOf,
  recordHistories,
  requestsOf,
  startCharge,
  updateFailureType,
  waitForStatus,
} from '../helpers/workflows';

const t = timeSkippingServerPerTest();

/** The creates the charge's reconcile scheduled (its resubmissions under the payment's key), from its history. */
async function resubmissionsOf(input: { readonly merchantId: string; readonly key: string }) {
  const history = await t.env.client.workflow
    .getHandle(reconcileWorkflowId(input.merchantId, 'create', input.key))
    .fetchHistory();
  return (history.events ?? []).filter(
    (e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'createPayment',
  );
}

describe('chargeWorkflow: the retry contract', () => {
  it('first call succeeds: one effect, the early answer is the settled payment, the payment closes after the refund window', async () => {
    const b = await t.world();
    await b.run(async () => {
      const input = b.input(chargeRequest());
      const { handle, view } = await startCharge(b, input);
      expect(view).toMatchObject({ status: 'succeeded', amountCaptured: 1_000, attempts: 1 });
      expect(view.providerPaymentId).toMatch(/^pay_/);
      expect(effectsOf(b, 'create')).toHaveLength(1);
      // result() skips the 30-day refund window.
      const final = await handle.result();
      expect(final.status).toBe('succeeded');
      // The workflow closed one refund window after the capture, in workflow time: not earlier, not a day later.
      expect(input.timings.refundWindowMs).toBe(30 * 24 * 3_600_000);
      const events = (await handle.fetchHistory()).events ?? [];
      const at = (e: (typeof events)[number] | undefined) =>
        Number(e?.eventTime?.seconds ?? NaN) * 1_000 + Math.floor((e?.eventTime?.nanos ?? 0) / 1e6);
      const create = events.find((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'createPayment');
      const capturedAt = at(
        events.find(
          (e) => String(e.activityTaskCompletedEventAttributes?.scheduledEventId) === String(create?.eventId),
        ),
      );
      const closedAt = at(events.find((e) => e.workflowExecutionCompletedEventAttributes));
      expect(closedAt - capturedAt).toBeGreaterThanOrEqual(input.timings.refundWindowMs);
      // Tolerance: the workflow tasks between the create answer and the timer (real time, a loaded machine).
      expect(closedAt - capturedAt).toBeLessThan(input.timings.refundWindowMs + 60_000);
      await recordHistories(b, 'charge-succeeded', [idOf(input)]);
    });
  });

  it('committed but the response was lost: the retry with the same key gets the stored answer; exactly one effect', async () => {
    const b = await t.world();
    await b.run(async () => {
      const input = b.input(chargeRequest());
      b.sim.addFaults({
        rules: [
          { match: { operation: 'create', reference: input.request.orderId }, fault: 'commit_then_drop', times: 1 },
        ],
      });
      const { handle, view } = await startCharge(b, input);
      expect(view.status).toBe('succeeded');
      expect(effectsOf(b, 'create')).toHaveLength(1);
      const creates = requestsOf(b, 'create');
      expect(creates).toHaveLength(2);
      expect(creates[1]?.replayed).toBe(true);
      // A repeat from the order service answers the same provider payment.
      const again = await handle.executeUpdate(submitUpdate, { args: [{ fingerprint: input.fingerprint }] });
      expect(again.providerPaymentId).toBe(view.providerPaymentId);
      expect(effectsOf(b, 'create')).toHaveLength(1);
      await recordHistories(b, 'charge-lost-response', [idOf(input)]);
    });
  });

  it('parallel repeats with one key: one workflow, one provider call, the same answer for all', async () => {
    const b = await t.world();
    await b.run(async () => {
      const input = b.input(chargeRequest());
      // The create is slow at the provider, so every repeat arrives while the first call is still in flight.
      b.sim.addFaults({
        rules: [
          { match: { operation: 'create', reference: input.request.orderId }, fault: 'latency', latency_ms: 1_500 },
        ],
      });
      const handle = await t.env.client.workflow.start<typeof chargeWorkflow>('chargeWorkflow', {
        workflowId: idOf(input),
        taskQueue: b.taskQueue,
        args: [input],
        memo: { fingerprint: input.fingerprint },
      });
      b.track(handle.workflowId);
      const updates = await Promise.all(
        Array.from({ length: 10 }, () =>
          handle.startUpdate(submitUpdate, {
            args: [{ fingerprint: input.fingerprint }],
            waitForStage: WorkflowUpdateStage.ACCEPTED,
          }),
        ),
      );
      // All ten were accepted while the payment was still pending: they overlap the first call.
      expect((await handle.query(paymentQuery)).status).toBe('pending');
      const views = await Promise.all(updates.map((u) => u.result()));
      expect(views.map((v) => v.status)).toEqual(Array.from({ length: 10 }, () => 'succeeded'));
      expect(new Set(views.map((v) => v.providerPaymentId)).size).toBe(1);
      expect(requestsOf(b, 'create')).toHaveLength(1);
      expect(effectsOf(b, 'create')).toHaveLength(1);
    });
  });

  it('the same key with a changed amount is rejected by the validator before any side effect', async () => {
    const b = await t.world();
    await b.run(async () => {
      const input = b.input(chargeRequest());
      const { handle } = await startCharge(b, input);
      const changed = b.input({ ...input.request, amount: { value: 999, currency: 'EUR' } }, { key: input.key });
      expect(changed.fingerprint).not.toBe(input.fingerprint);
      const type = await updateFailureType(
        handle.executeUpdate(submitUpdate, { args: [{ fingerprint: changed.fingerprint }] }),
      );
      expect(type).toBe(ErrorType.IdempotencyKeyReused);
      expect(requestsOf(b, 'create')).toHaveLength(1);
      // Rejected in the validator: no update accepted into history.
      const history = await handle.fetchHistory();
      const accepted = history.events?.filter((e) => e.workflowExecutionUpdateAcceptedEventAttributes) ?? [];
      expect(accepted).toHaveLength(1);
    });
  });

  it('a 4xx is not retried: one request, status failed', async () => {
    const b = await t.world();
    await b.run(async () => {
      const input = b.input(chargeRequest());
      b.sim.addFaults({
        rules: [{ match: { operation: 'create', reference: input.request.orderId }, fault: 'status', status: 400 }],
      });
      const { handle, view } = await startCharge(b, input);
      expect(view.status).toBe('failed');
      expect(requestsOf(b, 'create')).toHaveLength(1);
      expect((await handle.result()).status).toBe('failed');
      await recordHistories(b, 'charge-rejected', [idOf(input)]);
    });
  });

  it('a decline is an answer: status declined with its code, no retry', async () => {
    const b = await t.world();
    await b.run(async () => {
      const input = b.input(chargeRequest({ paymentMethod: 'pm_decline_insufficient_funds' }));
      const { handle, view } = await startCharge(b, input);
      expect(view).toMatchObject({ status: 'declined', declineCode: 'insufficient_funds' });
      expect(requestsOf(b, 'create')).toHaveLength(1);
      expect((await handle.result()).status).toBe('declined');
    });
  });
});

describe('chargeWorkflow: unknown outcomes', () => {
  it('provider without keys + lost response: no resend; the reconcile finds the payment by reference after skipped time', async () => {
    const b = await t.world({ noKeys: true });
    await b.run(async () => {
      const input = b.input(chargeRequest(), { timings: { reconcileScheduleMs: [3_600_000, 6 * 3_600_000] } });
      b.sim.addFaults({ rules: [{ match: { operation: 'create' }, fault: 'commit_then_drop', times: 1 }] });
      const { handle, view } = await startCharge(b, input);
      expect(view.status).toBe('unknown');
      expect(view.unknownSince).toBeDefined();
      const before = await t.env.currentTimeMs();
      await t.env.sleep('61 minutes');
      const found = await waitForStatus(handle, 'succeeded');
      expect((await t.env.currentTimeMs()) - before).toBeGreaterThanOrEqual(3_600_000);
      expect(found.providerPaymentId).toBe(effectsOf(b, 'create')[0]?.payment_id);
      expect(found.unknownSince).toBeUndefined();
      expect(requestsOf(b, 'create')).toHaveLength(1); // never sent twice
      expect(effectsOf(b, 'create')).toHaveLength(1);
      expect(requestsOf(b, 'lookup').length).toBeGreaterThanOrEqual(1);
      const reconcileId = reconcileWorkflowId(input.merchantId, 'create', input.key);
      const reconcileHistory = await t.env.client.workflow.getHandle(reconcileId).fetchHistory();
      expect(reconcileHistory.events?.filter((e) => e.timerStartedEventAttributes)).toHaveLength(1);
      // Stamped with the time the reconcile decided (its result says), not the clock of the task that heard it: a query
      // that applies the result ahead of that task answers the same view as the task.
      const reconciled = await t.env.client.workflow.getHandle<typeof reconcileWorkflow>(reconcileId).result();
      expect(reconciled.at).toBeDefined();
      expect(found.updatedAt).toBe(reconciled.at);
      await recordHistories(b, 'charge-unknown-found', [idOf(input), reconcileId]);
    });
  });

  it('a webhook ends the wait early: no lookups afterwards', async () => {
    const b = await t.world({ noKeys: true });
    await b.run(async () => {
      const input = b.input(chargeRequest(), { timings: { reconcileScheduleMs: [3_600_000, 6 * 3_600_000] } });
      b.sim.addFaults({ rules: [{ match: { operation: 'create' }, fault: 'commit_then_drop', times: 1 }] });
      const { handle, view } = await startCharge(b, input);
      expect(view.status).toBe('unknown');
      const paymentId = effectsOf(b, 'create')[0]?.payment_id as string;
      const payment = await b.provider.getPayment(paymentId);
      if (!payment) throw new Error('simulator lost the payment');
      const lookupsBefore = requestsOf(b, 'lookup').length; // the test's own read above
      const event = { eventId: 'evt_1', type: 'payment.succeeded' as const, created: payment.created, payment };
      await handle.signal(webhookSignal, event);
      await handle.signal(webhookSignal, event); // delivered twice: applied once
      await waitForStatus(handle, 'succeeded');
      const reconcile = t.env.client.workflow.getHandle(reconcileWorkflowId(input.merchantId, 'create', input.key));
      expect(await reconcile.result()).toMatchObject({ outcome: 'found', via: 'webhook', checks: 0 });
      await t.env.sleep('10 hours');
      expect(requestsOf(b, 'lookup')).toHaveLength(lookupsBefore);
      expect((await handle.query(paymentQuery)).status).toBe('succeeded');
      await recordHistories(b, 'charge-unknown-webhook', [idOf(input), reconcile.workflowId]);
    });
  });

  it.each([
    ['a second after the view’s last change', 1_000],
    ['a minute before it', -60_000],
  ])(
    'a webhook the API took %s: applied at that time, never before the view’s last change',
    async (_when, offsetMs) => {
      const b = await t.world({ noKeys: true });
      await b.run(async () => {
        const input = b.input(chargeRequest(), { timings: { reconcileScheduleMs: [3_600_000] } });
        b.sim.addFaults({ rules: [{ match: { operation: 'create' }, fault: 'commit_then_drop', times: 1 }] });
        const { handle, view } = await startCharge(b, input);
        expect(view.status).toBe('unknown');
        const payment = await b.provider.getPayment(effectsOf(b, 'create')[0]?.payment_id as string);
        if (!payment) throw new Error('simulator lost the payment');
        const receivedAt = new Date(Date.parse(view.updatedAt) + offsetMs).toISOString();
        const event = { eventId: 'evt_1', type: 'payment.succeeded' as const, created: payment.created, payment };
        await handle.signal(webhookSignal, event, 'simulator', { whenReady: true, receivedAt });
        const done = await waitForStatus(handle, 'succeeded');
        // The time the signal carries (a query that applies it ahead of its task stamps the same), monotonic.
        expect(done.updatedAt).toBe(offsetMs > 0 ? receivedAt : view.updatedAt);
      });
    },
  );

  it('never found: needs_review after the schedule (a same-key resubmission at each check), then an operator resolves it', async () => {
    const b = await t.world();
    await b.run(async () => {
      const input = b.input(chargeRequest(), {
        timings: { reconcileScheduleMs: [60_000, 3_600_000], settleWindowMs: 30_000 },
        // One attempt per create: each send is one request (the breaker stays closed, every resubmission leaves).
        retry: { create: { budgetMs: 4_000, attemptTimeoutMs: 3_500, maximumAttempts: 1 } },
      });
      // The request never commits, and the client cannot know: every create is reset after it was sent.
      b.sim.addFaults({ rules: [{ match: { operation: 'create' }, fault: 'reset_before_commit' }] });
      const { handle, view } = await startCharge(b, input);
      expect(['pending', 'unknown']).toContain(view.status);
      await waitForStatus(handle, 'unknown');
      await t.env.sleep('2 hours');
      const review = await waitForStatus(handle, 'needs_review');
      expect(review.review?.reason).toBe(
        'create not found at simulator after 2 checks over 1 h: 2 look-ups found nothing; ' +
          '2 resubmissions with the same key were sent, their outcomes unknown',
      );
      expect(effectsOf(b, 'create')).toHaveLength(0);
      // Resubmitted once per check by the reconcile, after the settle window, with the payment's own key.
      expect(await resubmissionsOf(input)).toHaveLength(2);
      expect(new Set(requestsOf(b, 'create').map((r) => r.idempotency_key)).size).toBe(1);
      // The time the API took the verdict (a second after the review, here): what it changes is stamped with it, so a
      // query that applies it ahead of its task answers the same view.
      const requestedAt = new Date(Date.parse(review.updatedAt) + 1_000).toISOString();
      const resolved = await resolve(handle, {
        outcome: 'failed',
        note: 'provider support confirmed no charge',
        requestedAt,
      });
      expect(resolved.status).toBe('failed');
      expect(resolved.updatedAt).toBe(requestedAt);
      expect(resolved.verdicts?.[0]?.at).toBe(requestedAt);
      expect((await handle.result()).status).toBe('failed');
      await recordHistories(b, 'charge-needs-review', [idOf(input)]);
    });
  });

  it('a resubmission whose outcome stays unknown is followed by another at the next check: the create is made once, not reviewed', async () => {
    const b = await t.world();
    await b.run(async () => {
      const input = b.input(chargeRequest(), {
        timings: { reconcileScheduleMs: [60_000, 60_000, 3_600_000], settleWindowMs: 30_000 },
        // One attempt per create: each send is one request whose outcome the client cannot know.
        retry: { create: { budgetMs: 4_000, attemptTimeoutMs: 3_500, maximumAttempts: 1 } },
      });
      // The charge's own create and the reconcile's first resubmission never commit (reset after sending).
      b.sim.addFaults({ rules: [{ match: { operation: 'create' }, fault: 'reset_before_commit', times: 2 }] });
      const { handle } = await startCharge(b, input);
      await waitForStatus(handle, 'unknown');
      await t.env.sleep('3 hours');
      const view = await waitForStatus(handle, 'succeeded');
      expect(view.review).toBeUndefined();
      expect(effectsOf(b, 'create')).toHaveLength(1);
      expect(requestsOf(b, 'create')).toHaveLength(3);
      expect(new Set(requestsOf(b, 'create').map((r) => r.idempotency_key)).size).toBe(1);
      expect(await resubmissionsOf(input)).toHaveLength(2);
      const reconcile = t.env.client.workflow.getHandle(reconcileWorkflowId(input.merchantId, 'create', input.key));
      expect(await reconcile.result()).toMatchObject({ outcome: 'found', via: 'resubmit' });
      await recordHistories(b, 'charge-resubmission-unknown-then-made', [idOf(input), reconcile.workflowId]);
    });
  });

  it('a resubmission the provider answers 429 without processing it is tried again: the create is made, not reviewed', async () => {
    const b = await t.world();
    await b.run(async () => {
      const input = b.input(chargeRequest(), {
        timings: { reconcileScheduleMs: [60_000, 60_000, 3_600_000], settleWindowMs: 30_000 },
        // One attempt per create: the resubmission answered 429 is one request, its answer final for it.
        retry: { create: { budgetMs: 4_000, attemptTimeoutMs: 3_500, maximumAttempts: 1 } },
      });
      // The charge's own create never commits (reset after sending): unknown, and the provider has nothing.
      b.sim.addFaults({ rules: [{ match: { operation: 'create' }, fault: 'reset_before_commit' }] });
      const { handle } = await startCharge(b, input);
      await waitForStatus(handle, 'unknown');
      // The reconcile's first resubmission is answered 429 (no Retry-After: no cool-down of the worker's provider).
      b.sim.clearFaults();
      b.sim.addFaults({ rules: [{ match: { operation: 'create' }, fault: 'status', status: 429, times: 1 }] });
      await t.env.sleep('3 hours');
      const view = await waitForStatus(handle, 'succeeded');
      expect(view.review).toBeUndefined();
      expect(effectsOf(b, 'create')).toHaveLength(1);
      expect(requestsOf(b, 'create').filter((r) => r.status === 429)).toHaveLength(1);
      expect(new Set(requestsOf(b, 'create').map((r) => r.idempotency_key)).size).toBe(1);
      expect((await resubmissionsOf(input)).length).toBeGreaterThanOrEqual(2);
      await recordHistories(b, 'charge-resubmission-unprocessed', [
        idOf(input),
        reconcileWorkflowId(input.merchantId, 'create', input.key),
      ]);
    });
  });

  it('resolve is refused unless the payment is in needs_review', async () => {
    const b = await t.world();
    await b.run(async () => {
      const input = b.input(chargeRequest());
      const { handle } = await startCharge(b, input);
      const type = await refusalType(resolve(handle, { outcome: 'failed', note: 'nope' }));
      expect(type).toBe(ErrorType.InvalidTransition);
      expect((await handle.query(paymentQuery)).status).toBe('succeeded');
    });
  });
});
