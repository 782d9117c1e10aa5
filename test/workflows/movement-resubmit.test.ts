/**
 * A capture or refund whose every attempt met a provider outage (503 for its whole retry budget) has an unknown
 * outcome; once the outage is over its reconcile's look-ups find nothing. After the settle window the reconcile sends
 * the same write again under the same key, as a create's does: safe because the provider stores the key (a write that
 * did commit replays its answer). The operation settles without an operator and the ledger holds one effect. The
 * 1,000-payment soak found the opposite: a capture that never reached the provider ended in review. On the
 * time-skipping server against the real simulator over HTTP; a provider without keys is never sent to again.
 */
import { InMemoryCircuitBreaker } from '../../src/breaker';
import { reconcileWorkflowId } from '../../src/domain/ids';
import type { ReconcileResult } from '../../src/domain/operations';
import type { RetryOverrides } from '../../src/domain/retry';
import { type World, timeSkippingServerPerTest } from '../helpers/world';
import { opOf, waitForOperation } from '../helpers/operations';
import { chargeRequest, idOf } from '../helpers/payments';
import { capture, refund } from '../helpers/requests';
import { effectsOf, recordHistories, requestsOf, startCharge } from '../helpers/workflows';

const t = timeSkippingServerPerTest();

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;

/** Writes whose outcome is unknown within seconds: two attempts, both answered 503 while the outage lasts. */
const write = { initialIntervalMs: 100, maximumIntervalMs: 200, attemptTimeoutMs: 4_000, budgetMs: 10_000 };
const retry: RetryOverrides = {
  capture: { ...write, maximumAttempts: 2 },
  refund: { ...write, maximumAttempts: 2 },
};
/** Two checks, the second past the settle window: only the second may resubmit. */
const timings = { reconcileScheduleMs: [MINUTE, 10 * MINUTE], settleWindowMs: 2 * MINUTE };

/** The provider answers 503 to every `operation` until `end()`: the soak's outage, on one kind of write. */
function outage(b: World, operation: 'capture' | 'refund') {
  b.sim.addFaults({ rules: [{ match: { operation }, fault: 'status', status: 503 }] });
  return { end: () => b.sim.clearFaults() };
}

describe('a capture or refund that met an outage for its whole retry budget', () => {
  it('the capture is resubmitted with its key after the settle window and settles captured, no review', async () => {
    const b = await t.world();
    await b.run(async () => {
      const input = b.input(chargeRequest({ capture: 'manual' }), { retry, timings });
      const { handle } = await startCharge(b, input);
      const down = outage(b, 'capture');
      const view = await capture(handle, { captureKey: 'cap-dark', fingerprint: 'f' });
      expect(opOf(view, 'capture', 'cap-dark')?.state).toBe('running'); // unknown: its reconcile checks
      expect(requestsOf(b, 'capture').every((r) => r.status === 503)).toBe(true);
      down.end();

      await t.env.sleep(12 * MINUTE);
      const done = await waitForOperation(handle, 'capture', 'cap-dark', 'succeeded');
      expect(done).toMatchObject({ status: 'succeeded', amountCaptured: 1_000 });
      expect(done.review).toBeUndefined();
      expect(effectsOf(b, 'capture')).toHaveLength(1);
      const reconcileId = reconcileWorkflowId(input.merchantId, 'capture', 'cap-dark');
      const result = (await t.env.client.workflow.getHandle(reconcileId).result()) as ReconcileResult;
      expect(result).toMatchObject({ outcome: 'found', via: 'resubmit', checks: 2, resubmissionSends: 1 });
      await recordHistories(b, 'capture-reconcile-resubmits', [idOf(input), reconcileId]);
    });
  });

  it('the refund is resubmitted with its key after the settle window and settles refunded, no review', async () => {
    const b = await t.world();
    await b.run(async () => {
      const input = b.input(chargeRequest(), { retry, timings });
      await startCharge(b, input);
      const handle = t.env.client.workflow.getHandle(idOf(input));
      const down = outage(b, 'refund');
      const args = { refundKey: 'ref-dark', fingerprint: 'f', amount: 400 };
      const view = await refund(handle, args);
      expect(opOf(view, 'refund', 'ref-dark')?.state).toBe('running');
      down.end();

      await t.env.sleep(12 * MINUTE);
      const done = await waitForOperation(handle, 'refund', 'ref-dark', 'succeeded');
      expect(done).toMatchObject({ status: 'succeeded', amountCaptured: 1_000, amountRefunded: 400 });
      expect(done.review).toBeUndefined();
      expect(effectsOf(b, 'refund').map((e) => e.amount)).toEqual([400]);
    });
  });

  it('a resubmission refused here by the open breaker sent nothing: the next check resends, captured, no review', async () => {
    // The CI soak's four creates in review: their one resubmission met the breaker the outage had opened.
    // The breaker's clock moves with the test's skipped time only when told to (it reads the worker's wall clock).
    let skippedMs = 0;
    const breaker = new InMemoryCircuitBreaker({
      failureThreshold: 1,
      cooldownMs: 30 * MINUTE,
      now: () => Date.now() + skippedMs,
    });
    const b = await t.world({ breaker });
    await b.run(async () => {
      const schedule = { reconcileScheduleMs: [MINUTE, 10 * MINUTE, HOUR], settleWindowMs: 30_000 };
      const input = b.input(chargeRequest({ capture: 'manual' }), { retry, timings: schedule });
      const { handle } = await startCharge(b, input);
      const down = outage(b, 'capture');
      await capture(handle, { captureKey: 'cap-held', fingerprint: 'f' });
      down.end();
      // The 503s opened the breaker for 30 min: the resubmissions at the first two checks never leave.
      const sent = requestsOf(b, 'capture').length;
      await t.env.sleep(12 * MINUTE);
      expect(requestsOf(b, 'capture')).toHaveLength(sent);

      skippedMs = HOUR; // the breaker's 30 min are over by the third check
      await t.env.sleep(HOUR);
      const done = await waitForOperation(handle, 'capture', 'cap-held', 'succeeded');
      expect(done).toMatchObject({ status: 'succeeded', amountCaptured: 1_000 });
      expect(effectsOf(b, 'capture')).toHaveLength(1);
      const reconcileId = reconcileWorkflowId(input.merchantId, 'capture', 'cap-held');
      const result = (await t.env.client.workflow.getHandle(reconcileId).result()) as ReconcileResult;
      expect(result).toMatchObject({ outcome: 'found', via: 'resubmit', checks: 3 });
      await recordHistories(b, 'capture-resubmission-refused-then-sent', [reconcileId]);
    });
  });

  it('against a provider without keys nothing is resent: the capture goes to review, one capture request only', async () => {
    const b = await t.world({ noKeys: true });
    await b.run(async () => {
      const input = b.input(chargeRequest({ capture: 'manual' }), { retry, timings });
      const { handle } = await startCharge(b, input);
      const down = outage(b, 'capture');
      await capture(handle, { captureKey: 'cap-nokeys', fingerprint: 'f' });
      const sent = requestsOf(b, 'capture').length;
      down.end();

      await t.env.sleep(12 * MINUTE);
      const review = await waitForOperation(handle, 'capture', 'cap-nokeys', 'needs_review');
      expect(review.status).toBe('needs_review');
      expect(requestsOf(b, 'capture')).toHaveLength(sent);
      expect(effectsOf(b, 'capture')).toHaveLength(0);
    });
  });
});
