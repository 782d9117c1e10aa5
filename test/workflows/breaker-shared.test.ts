/**
 * The shared breaker end to end, in real time on the dev server: two workers (two Worker sets on one task queue, each
 * with its own provider client and its own breaker client) against the simulator answering every create with a 503.
 * After the trip the ledger's create requests stop; each open period ends in exactly one probe across both workers;
 * when the provider is healthy again the probe closes the breaker for both and every charge succeeds once.
 * Run once with the Redis store (one redis-server, two connections: two processes) and once with one in-process
 * breaker shared by both Worker sets (one process).
 */
import { type InspectableBreaker, InMemoryCircuitBreaker } from '../../src/breaker';
import { chargeRequest } from '../helpers/payments';
import { observeBreaker, redisFixture, startWorkerPair, startWorkersHere } from '../helpers/shared-breaker';
import { eventually } from '../helpers/eventually';
import { effectsOf, requestsOf, startCharge, waitForStatus } from '../helpers/workflows';

const fx = redisFixture();
const OPEN_MS = 3_000;
const policy = {
  failureThreshold: 3,
  // The window's rate rule stays out of this test: the consecutive rule trips.
  window: { durationMs: 60_000, failureRate: 1, minimumCalls: 1_000_000 },
  cooldownMs: OPEN_MS,
  probeTimeoutMs: 5_000,
  jitterMs: 200,
};

describe.each([
  ['Redis store, two worker processes', 'redis'],
  ['in-process store, one worker process', 'in-process'],
] as const)('%s', (name, store) => {
  it('after the trip the workers stop calling; one probe per open period; the probe closes it for all', async () => {
    const b = await fx.world({ totalTimeoutMs: 2_000 });
    const calls = { creates: 0 };
    let observer: InspectableBreaker;
    /** Drains both processes' workers; answers the other process's creates. */
    let stop: () => Promise<number>;
    if (store === 'redis') {
      const pair = await startWorkerPair(fx, b, { policy, calls });
      observer = observeBreaker(fx, policy, pair.keyPrefix);
      stop = pair.stop;
    } else {
      const shared = new InMemoryCircuitBreaker(policy);
      observer = shared;
      const here = await startWorkersHere(fx, b, shared, { calls });
      stop = async () => {
        await here.close();
        return 0;
      };
    }
    b.sim.addFaults({ rules: [{ match: { operation: 'create' }, fault: 'status', status: 503 }] });
    const retry = {
      create: { budgetMs: 90_000, attemptTimeoutMs: 5_000, initialIntervalMs: 100, maximumIntervalMs: 200 },
    };
    const charge = async () => (await startCharge(b, b.input(chargeRequest(), { retry }))).handle;
    // One charge trips it (its attempts are sequential, so nothing is in flight at the trip)...
    const handles = [await charge()];
    const creates = () => requestsOf(b, 'create');
    const between = (from: number, to: number) => creates().filter((r) => (r.at_ms ?? 0) > from && (r.at_ms ?? 0) < to);

    const first = await eventually(
      'the trip',
      async () => {
        const s = await observer.state('simulator');
        return s.kind === 'open' ? s.until : undefined;
      },
      30_000,
      25,
    );
    const trippedAt = first - OPEN_MS;
    const beforeTrip = creates().length;
    expect(beforeTrip).toBe(3);
    // ...three more start while it is open: their first attempts never leave.
    handles.push(...(await Promise.all([charge(), charge(), charge()])));
    // The failed probe re-opens it: a later `until`.
    const second = await eventually(
      'the failed probe to re-open it',
      async () => {
        const s = await observer.state('simulator');
        return s.kind === 'open' && s.until > first ? s.until : undefined;
      },
      30_000,
      25,
    );
    b.sim.clearFaults(); // healthy again: the next probe will succeed
    expect(between(trippedAt, first)).toHaveLength(0); // open: nothing reached the provider
    const firstProbe = between(first, second - OPEN_MS + 1);
    expect(firstProbe).toHaveLength(1);
    expect(firstProbe[0]?.status).toBe(503);

    for (const h of handles) await waitForStatus(h, 'succeeded', 30_000);
    const reopenedAt = second - OPEN_MS;
    expect(between(reopenedAt, second)).toHaveLength(0);
    const afterReopen = creates().filter((r) => (r.at_ms ?? 0) >= second);
    // One probe (200) closes it, then the three other charges each send once.
    expect(afterReopen.map((r) => r.status)).toEqual([200, 200, 200, 200]);
    expect(effectsOf(b, 'create')).toHaveLength(4);
    expect(creates().map((r) => r.status)).toEqual([503, 503, 503, 503, 200, 200, 200, 200]);
    const otherCreates = await stop();
    expect(calls.creates + otherCreates).toBe(creates().length);
    console.info(
      `${name}: creates before the trip ${beforeTrip}, during open periods 0, probes 2 (503 then 200), after close ${afterReopen.length - 1}; per process ${calls.creates} + ${otherCreates}; open ${trippedAt}..${first}, re-opened ${second - OPEN_MS}..${second}`,
    );
  });
});
