/**
 * Retry timing in real time on the dev server (a time-skipping server would skip the very delays under test): a 503
 * with Retry-After is retried after at least that delay, never beyond the budget, and not at all after it.
 */
import { type World, serverPerFile } from '../helpers/world';
import { chargeRequest } from '../helpers/payments';
import { effectsOf, recordHistories, requestsOf, startCharge, waitForStatus } from '../helpers/workflows';

const t = serverPerFile();

const gaps = (b: World) => {
  const at = requestsOf(b, 'create').map((r) => r.at_ms ?? 0);
  return at.slice(1).map((t, i) => t - (at[i] ?? 0));
};

it('503 with Retry-After: the next attempt waits at least that long, then succeeds with one effect', async () => {
  const b = await t.world({ totalTimeoutMs: 2_000 });
  await b.run(async () => {
    const input = b.input(chargeRequest());
    b.sim.addFaults({
      rules: [
        { match: { reference: input.request.orderId }, fault: 'status', status: 503, retry_after_s: 2, times: 1 },
      ],
    });
    const { handle } = await startCharge(b, input);
    await waitForStatus(handle, 'succeeded');
    expect(requestsOf(b, 'create').map((r) => r.status)).toEqual([503, 200]);
    expect(gaps(b)[0]).toBeGreaterThanOrEqual(2_000);
    expect(effectsOf(b, 'create')).toHaveLength(1);
    await recordHistories(b, 'charge-retry-after', [handle.workflowId]);
  });
});

it('a provider that stays unavailable: attempts stop within the budget, none after it, and the payment is unknown, not failed', async () => {
  const b = await t.world({ totalTimeoutMs: 1_000 });
  await b.run(async () => {
    const budgetMs = 6_000;
    const input = b.input(chargeRequest(), {
      retry: { create: { budgetMs, attemptTimeoutMs: 1_500, initialIntervalMs: 100, maximumIntervalMs: 500 } },
      timings: { reconcileScheduleMs: [600_000] },
    });
    b.sim.addFaults({
      rules: [
        {
          match: { operation: 'create', reference: input.request.orderId },
          fault: 'status',
          status: 503,
          retry_after_s: 1,
        },
      ],
    });
    const { handle } = await startCharge(b, input);
    const view = await waitForStatus(handle, 'unknown', budgetMs + 10_000);
    expect(view.status).toBe('unknown'); // a 503 proves nothing about earlier attempts: never guess failed
    const creates = requestsOf(b, 'create');
    expect(creates.length).toBeGreaterThanOrEqual(3);
    for (const gap of gaps(b)) expect(gap).toBeGreaterThanOrEqual(1_000); // Retry-After wins over the 100 ms backoff
    const first = creates[0]?.at_ms ?? 0;
    const last = creates[creates.length - 1]?.at_ms ?? 0;
    expect(last - first).toBeLessThanOrEqual(budgetMs);
    const countAtUnknown = creates.length;
    await new Promise((r) => setTimeout(r, 2_500));
    expect(requestsOf(b, 'create')).toHaveLength(countAtUnknown);
    expect(effectsOf(b, 'create')).toHaveLength(0);
    await recordHistories(b, 'charge-budget-exhausted', [handle.workflowId]);
  });
});
