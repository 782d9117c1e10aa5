/**
 * Regression tests of the money-path defects (issue: money paths that never lie), on the time-skipping server against
 * the real simulator over HTTP. Each one failed on the code before its fix; the simulator's ledger is the witness.
 */
import { paymentQuery } from '../../src/domain/definitions';
import { ErrorType } from '../../src/domain/errors';
import { InMemoryCircuitBreaker } from '../../src/breaker';
import { timeSkippingServerPerTest } from '../helpers/world';
import { opOf, unknownRefundRetry, waitForOperation } from '../helpers/operations';
import { chargeRequest, idOf } from '../helpers/payments';
import { capture, refund, refusalType, resolve } from '../helpers/requests';
import { effectsOf, recordHistories, requestsOf, startCharge, waitForStatus } from '../helpers/workflows';

const t = timeSkippingServerPerTest();

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

describe('capture and refund answers follow what the provider did', () => {
  it('a refund the provider refuses is recorded as rejected with its code; a repeat answers the same, no second request', async () => {
    const b = await t.world();
    await b.run(async () => {
      const input = b.input(chargeRequest());
      const { handle } = await startCharge(b, input);
      b.sim.addFaults({ rules: [{ match: { operation: 'refund' }, fault: 'status', status: 400, times: 1 }] });
      const refused = { refundKey: 'r-refused', fingerprint: 'f-r', amount: 300 };
      const view = await refund(handle, refused);
      expect(view.amountRefunded).toBe(0);
      expect(opOf(view, 'refund', 'r-refused')).toMatchObject({ state: 'rejected', amount: 300 });
      const again = await refund(handle, refused);
      expect(opOf(again, 'refund', 'r-refused')?.state).toBe('rejected');
      expect(requestsOf(b, 'refund')).toHaveLength(1);
      expect(effectsOf(b, 'refund')).toHaveLength(0);
      // The refusal did not reserve the amount: a new refund key may take all of it.
      const full = await refund(handle, { refundKey: 'r-ok', fingerprint: 'f-ok', amount: 1_000 });
      expect(opOf(full, 'refund', 'r-ok')?.state).toBe('succeeded');
      expect(full.amountRefunded).toBe(1_000);
      await recordHistories(b, 'refund-rejected', [idOf(input)]);
    });
  });

  it('a refund key used on another payment of the merchant is refused before any effect', async () => {
    const b = await t.world();
    await b.run(async () => {
      const first = await startCharge(b, b.input(chargeRequest()));
      const second = await startCharge(b, b.input(chargeRequest()));
      const shared = { refundKey: 'r-shared', fingerprint: 'f-shared', amount: 100 };
      const done = await refund(first.handle, shared);
      expect(opOf(done, 'refund', 'r-shared')?.state).toBe('succeeded');
      expect(await refusalType(refund(second.handle, shared))).toBe(ErrorType.IdempotencyKeyReused);
      expect(requestsOf(b, 'refund')).toHaveLength(1);
      expect((await second.handle.query(paymentQuery)).operations).toBeUndefined();
    });
  });

  it('two overlapping captures with one key and different amounts: one wins, the other is refused as a reused key', async () => {
    const b = await t.world();
    await b.run(async () => {
      const { handle } = await startCharge(b, b.input(chargeRequest({ capture: 'manual' })));
      // The first capture is slow at the provider, so the second arrives while it is in flight.
      b.sim.addFaults({ rules: [{ match: { operation: 'capture' }, fault: 'latency', latency_ms: 1_500, times: 1 }] });
      const results = await Promise.allSettled([
        capture(handle, { captureKey: 'c-same', fingerprint: 'f-300', amount: 300 }),
        capture(handle, { captureKey: 'c-same', fingerprint: 'f-500', amount: 500 }),
      ]);
      const won = results.filter((r) => r.status === 'fulfilled');
      const lost = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
      expect(won).toHaveLength(1);
      expect(lost).toHaveLength(1);
      expect(await refusalType(Promise.reject(lost[0]?.reason))).toBe(ErrorType.IdempotencyKeyReused);
      const effects = effectsOf(b, 'capture');
      expect(effects).toHaveLength(1);
      expect((await handle.query(paymentQuery)).amountCaptured).toBe(effects[0]?.amount);
    });
  });
});

describe('an unknown capture or refund outcome', () => {
  it('past the refund window with a refund still reconciling: no spinning timers, new refunds refused, closes after', async () => {
    const b = await t.world();
    await b.run(async () => {
      const input = b.input(chargeRequest(), {
        retry: unknownRefundRetry,
        timings: { refundWindowMs: DAY, reconcileScheduleMs: [2 * DAY, HOUR], unknownSweepThresholdMs: 4 * DAY },
      });
      const { handle } = await startCharge(b, input);
      b.sim.addFaults({ rules: [{ match: { operation: 'refund' }, fault: 'status', status: 500 }] });
      await refund(handle, { refundKey: 'r-slow', fingerprint: 'f', amount: 400 });
      await t.env.sleep(DAY + HOUR); // the window closes while the reconcile waits for its first check

      expect(await refusalType(refund(handle, { refundKey: 'r-late', fingerprint: 'f2', amount: 1 }))).toBe(
        ErrorType.InvalidTransition,
      );
      const history = await handle.fetchHistory();
      const timers = history.events?.filter((e) => e.timerStartedEventAttributes) ?? [];
      // The refund-window timer and nothing else: the old loop started a 1 ms timer over and over here.
      expect(timers.length).toBeLessThanOrEqual(2);

      expect(opOf(await handle.query(paymentQuery), 'refund', 'r-slow')?.state).toBe('running');
    });
  });
});

describe('capture and refund outcomes that are unknown', () => {
  it('a refund whose every answer is lost is found by its reconcile: succeeded, exactly one effect', async () => {
    const b = await t.world();
    await b.run(async () => {
      const input = b.input(chargeRequest(), {
        retry: unknownRefundRetry,
        timings: { reconcileScheduleMs: [HOUR, HOUR] },
      });
      const { handle } = await startCharge(b, input);
      b.sim.addFaults({ rules: [{ match: { operation: 'refund' }, fault: 'commit_then_drop' }] });
      const view = await refund(handle, { refundKey: 'r-lost', fingerprint: 'f', amount: 400 });
      expect(opOf(view, 'refund', 'r-lost')?.state).toBe('running');
      expect(view.amountRefunded).toBe(0);
      await t.env.sleep(HOUR + 60_000);
      const found = await waitForOperation(handle, 'refund', 'r-lost', 'succeeded');
      expect(found.amountRefunded).toBe(400);
      expect(found.status).toBe('succeeded');
      expect(effectsOf(b, 'refund')).toHaveLength(1);
      await recordHistories(b, 'refund-unknown-found', [idOf(input)]);
    });
  });

  it('a capture never found goes to review; the operator says it failed: authorized again, a new capture works', async () => {
    const b = await t.world();
    await b.run(async () => {
      const input = b.input(chargeRequest({ capture: 'manual' }), {
        retry: {
          capture: {
            initialIntervalMs: 100,
            maximumIntervalMs: 200,
            attemptTimeoutMs: 7_000,
            budgetMs: 10_000,
            // One request per send: three resets stay under the breaker's threshold, the new capture below is sent.
            maximumAttempts: 1,
          },
        },
        timings: { reconcileScheduleMs: [HOUR, HOUR] },
      });
      const { handle } = await startCharge(b, input);
      // Every attempt, and those of the reconcile's resubmissions with the same key, is reset before the provider commits.
      b.sim.addFaults({ rules: [{ match: { operation: 'capture' }, fault: 'reset_before_commit' }] });
      const view = await capture(handle, { captureKey: 'c-lost', fingerprint: 'f' });
      expect(opOf(view, 'capture', 'c-lost')?.state).toBe('running');
      await t.env.sleep(2 * HOUR + 60_000);
      const review = await waitForStatus(handle, 'needs_review');
      expect(review.review?.reason).toBe(
        'capture not found at simulator after 2 checks over 2 h: 2 look-ups found nothing; ' +
          '2 resubmissions with the same key were sent, their outcomes unknown',
      );
      expect(requestsOf(b, 'capture')).toHaveLength(3); // the first call, and a resubmission at each check
      b.sim.clearFaults();
      expect(opOf(review, 'capture', 'c-lost')?.state).toBe('needs_review');
      expect(effectsOf(b, 'capture')).toHaveLength(0);
      const resolved = await resolve(handle, { outcome: 'failed', note: 'not captured' });
      expect(resolved).toMatchObject({ status: 'authorized', amountCaptured: 0 });
      expect(opOf(resolved, 'capture', 'c-lost')?.state).toBe('rejected');
      const again = await capture(handle, { captureKey: 'c-2', fingerprint: 'f2' });
      expect(again).toMatchObject({ status: 'succeeded', amountCaptured: 1_000 });
      expect(effectsOf(b, 'capture')).toHaveLength(1);
    });
  });
});

describe('a charge that never reaches the provider', () => {
  it('every attempt met an open breaker: failed with provider_unavailable, not unknown; no request at all', async () => {
    const breaker = new InMemoryCircuitBreaker({ failureThreshold: 1, cooldownMs: HOUR });
    await breaker.record('simulator', 'ProviderUnavailable');
    expect(breaker.state('simulator').kind).toBe('open');
    const b = await t.world({ breaker });
    await b.run(async () => {
      const input = b.input(chargeRequest(), {
        retry: {
          create: { initialIntervalMs: 100, maximumIntervalMs: 200, attemptTimeoutMs: 5_000, budgetMs: 10_000 },
        },
      });
      const { handle } = await startCharge(b, input);
      const final = await handle.result();
      expect(final).toMatchObject({ status: 'failed', failureReason: 'provider_unavailable' });
      expect(final.unknownSince).toBeUndefined();
      expect(b.ledger().requests).toHaveLength(0);
      const children = (await handle.fetchHistory()).events?.filter(
        (e) => e.startChildWorkflowExecutionInitiatedEventAttributes,
      );
      expect(children).toHaveLength(0); // no reconcile: nothing can have happened
    });
  });
});

describe('a void after authorization expiry', () => {
  it('a void the provider refuses is reviewed as a void; `succeeded` only once the provider shows it voided', async () => {
    const b = await t.world();
    await b.run(async () => {
      const input = b.input(chargeRequest({ capture: 'manual' }), { timings: { authorizationExpiryMs: DAY } });
      const { handle, view } = await startCharge(b, input);
      expect(view.status).toBe('authorized');
      b.sim.addFaults({ rules: [{ match: { operation: 'void' }, fault: 'status', status: 400 }] });
      await t.env.sleep(DAY + HOUR);
      const review = await waitForStatus(handle, 'needs_review');
      expect(review.review?.reason).toMatch(/void after authorization expiry failed/);
      expect(review.operations).toEqual([expect.objectContaining({ kind: 'void', state: 'needs_review' })]);

      // The provider still shows it authorized: `succeeded` is refused, nothing recorded.
      expect(await refusalType(resolve(handle, { outcome: 'succeeded', note: 'surely voided' }))).toBe(
        ErrorType.ProviderDisagrees,
      );
      expect(await handle.query(paymentQuery)).toMatchObject({ status: 'needs_review', amountCaptured: 0 });
      // The operator voids it in the provider's dashboard; now the provider confirms the verdict.
      b.sim.clearFaults();
      await b.provider.voidPayment(view.providerPaymentId as string, {
        idempotencyKey: 'by-hand',
        attempt: 1,
        requestId: 'by-hand',
      });
      const resolved = await resolve(handle, { outcome: 'succeeded', note: 'voided in the provider dashboard' });
      expect(resolved).toMatchObject({ status: 'voided', amountCaptured: 0, amountAuthorized: 1_000 });
      expect(resolved.verdicts).toEqual([
        expect.objectContaining({ outcome: 'succeeded', operation: 'void', note: 'voided in the provider dashboard' }),
      ]);
      expect(effectsOf(b, 'void')).toHaveLength(1);
      expect(await handle.result()).toMatchObject({ status: 'voided', amountCaptured: 0 });
      await recordHistories(b, 'void-review', [idOf(input)]);
    });
  });
});

describe('an operator resolving a charge under review', () => {
  it('a providerPaymentId is checked at the provider: a foreign or missing one is refused, the real one is adopted', async () => {
    const b = await t.world();
    await b.run(async () => {
      // Another payment of the same merchant exists at the provider.
      const other = await startCharge(b, b.input(chargeRequest()));
      const otherId = other.view.providerPaymentId as string;
      // This one never reaches the provider (every create is reset before commit): its reconcile ends in review.
      const input = b.input(chargeRequest(), {
        retry: {
          create: {
            initialIntervalMs: 100,
            maximumIntervalMs: 200,
            attemptTimeoutMs: 7_000,
            budgetMs: 10_000,
            maximumAttempts: 2,
          },
        },
        timings: { reconcileScheduleMs: [60_000, 60_000], settleWindowMs: 3_600_000 },
      });
      b.sim.addFaults({
        rules: [{ match: { operation: 'create', reference: input.request.orderId }, fault: 'reset_before_commit' }],
      });
      const { handle } = await startCharge(b, input);
      await t.env.sleep(3 * 60_000);
      const review = await waitForStatus(handle, 'needs_review');
      expect(review.providerPaymentId).toBeUndefined();
      b.sim.clearFaults();
      // The operator found it charged by hand in the provider's dashboard, under this payment's metadata.
      const mine = await b.provider.createPayment(
        {
          amount: 1_000,
          currency: 'EUR',
          reference: input.request.orderId,
          paymentMethod: 'pm_card_visa',
          capture: 'automatic',
          metadata: { merchant_id: input.merchantId, payment_key: input.key },
        },
        { idempotencyKey: 'by-hand', attempt: 1, requestId: 'by-hand' },
      );
      if (mine.outcome === 'declined') throw new Error('the hand-made payment declined');

      for (const providerPaymentId of [otherId, 'pay_does_not_exist']) {
        expect(await refusalType(resolve(handle, { outcome: 'succeeded', providerPaymentId, note: 'x' }))).toBe(
          ErrorType.ValidationError,
        );
      }
      expect((await handle.query(paymentQuery)).status).toBe('needs_review');
      const resolved = await resolve(handle, {
        outcome: 'succeeded',
        providerPaymentId: mine.payment.id,
        note: 'found in dashboard',
      });
      expect(resolved).toMatchObject({
        status: 'succeeded',
        providerPaymentId: mine.payment.id,
        amountCaptured: 1_000,
      });
    });
  });
});
