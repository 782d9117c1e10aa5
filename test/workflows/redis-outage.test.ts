/**
 * Redis dies mid-run, end to end, in real time on the dev server: two worker processes (this one and a child, each on
 * its own task queue, so which process runs which payment is fixed) share one redis-server through `createBreaker`.
 * It is killed (SIGKILL): payments on both processes keep succeeding on their in-process breakers, and each process
 * logs the switch. It comes back, empty, on the same port: both return to it (and log it), and the shared state is
 * used again: a trip recorded by the child's payment holds back a payment of this process, with no request sent.
 */
import pino from 'pino';
import type { BreakerStoreEvent } from '../../src/breaker';
import { ErrorType } from '../../src/domain/errors';
import { chargeRequest } from '../helpers/payments';
import { observeBreaker, redisFixture, startWorkerPair } from '../helpers/shared-breaker';
import { eventually } from '../helpers/eventually';
import { requestsOf, startChargeOn, waitForStatus } from '../helpers/workflows';

const fx = redisFixture();
const OPEN_MS = 4_000;
const policy = {
  failureThreshold: 3,
  window: { durationMs: 60_000, failureRate: 1, minimumCalls: 1_000_000 },
  cooldownMs: OPEN_MS,
  probeTimeoutMs: 5_000,
  jitterMs: 100,
};
const retry = {
  create: { budgetMs: 30_000, attemptTimeoutMs: 5_000, initialIntervalMs: 100, maximumIntervalMs: 200 },
};

it('Redis killed mid-run: payments keep succeeding on both processes, each logs it; back on the same port, the shared state is used again', async () => {
  const b = await fx.world({ totalTimeoutMs: 2_000 });
  const server = fx.redis;
  const here = b.taskQueue;
  const there = `${b.taskQueue}-child`;
  // This process's breaker log and store switches (the worker's own logger and the metrics hook).
  const logged: { level: number; msg: string }[] = [];
  const breakerLog = pino({ level: 'info' }, { write: (line: string) => void logged.push(JSON.parse(line)) });
  const switches: BreakerStoreEvent['store'][] = [];
  const pair = await startWorkerPair(fx, b, {
    policy,
    here,
    there,
    breakerLogger: breakerLog,
    observer: { onStoreChange: (e) => switches.push(e.store) },
    childLogLevel: 'info',
  });
  const other = pair.child;
  const childSays = (text: string) => other.logs().filter((l) => l.msg.includes(text)).length;
  const hereSays = (text: string) => logged.filter((l) => l.msg.includes(text)).length;
  /** Charges once on each process's queue and waits until both succeeded. */
  const onePaymentEach = async () => {
    const handles = await Promise.all(
      [here, there].map((q) => startChargeOn(b, b.input(chargeRequest(), { retry }), q)),
    );
    for (const h of handles) await waitForStatus(h, 'succeeded', 15_000);
  };
  await onePaymentEach();
  expect(hereSays('circuit breaker: shared Redis store')).toBe(1);

  await server.kill();
  for (let i = 0; i < 2; i++) await onePaymentEach();
  expect(hereSays('unreachable')).toBe(1); // once, not once per call
  expect(childSays('unreachable')).toBe(1);
  expect(switches).toEqual(['local']);

  // The same address, empty (no persistence): both reconnect on their own.
  await fx.restartRedis();
  const observer = observeBreaker(fx, policy, pair.keyPrefix);
  const observerClient = observer.redis;
  await eventually(
    'both workers to reconnect',
    async () => {
      if (observerClient.status !== 'ready') return undefined;
      const clients = String(await observerClient.client('LIST'))
        .trim()
        .split('\n');
      return clients.length >= 3 ? true : undefined; // the observer, this process, the child
    },
    10_000,
    25,
  );
  await onePaymentEach();
  expect(hereSays('is back; using it again')).toBe(1);
  expect(childSays('is back; using it again')).toBe(1);
  expect(switches).toEqual(['local', 'shared']);

  // Shared again: the child's payment trips the breaker in Redis...
  b.sim.addFaults({ rules: [{ match: { operation: 'create' }, fault: 'status', status: 503 }] });
  const tripper = b.input(chargeRequest(), { retry });
  const tripping = await startChargeOn(b, tripper, there);
  const openUntil = await eventually(
    'the child to trip the shared breaker',
    async () => {
      const s = await observer.state('simulator');
      return s.kind === 'open' ? s.until : undefined;
    },
    10_000,
    25,
  );
  // ...and a payment of this process is refused before it is sent.
  const held = b.input(chargeRequest(), { retry });
  const holding = await startChargeOn(b, held, here);
  const refusal = await eventually(
    'this process to refuse its create',
    async () => {
      const { raw } = await holding.describe();
      const create = raw.pendingActivities?.find((a) => a.activityType?.name === 'createPayment');
      return (create?.attempt ?? 0) >= 2 ? create : undefined;
    },
    10_000,
    25,
  );
  expect(refusal.lastFailure?.applicationFailureInfo?.type).toBe(ErrorType.CircuitOpen);
  expect(Date.now()).toBeLessThan(openUntil);
  const heldCreates = () => requestsOf(b, 'create').filter((r) => r.reference === held.request.orderId);
  expect(heldCreates()).toEqual([]);

  b.sim.clearFaults(); // healthy: the next probe closes it
  await waitForStatus(holding, 'succeeded', 20_000);
  await waitForStatus(tripping, 'succeeded', 20_000);
  expect(heldCreates().map((r) => r.status)).toEqual([200]);
  expect(heldCreates()[0]?.at_ms ?? 0).toBeGreaterThanOrEqual(openUntil);
  const tripperCreates = requestsOf(b, 'create').filter((r) => r.reference === tripper.request.orderId);
  // Three 503s tripped it; nothing was sent while it was open.
  expect(
    requestsOf(b, 'create').filter(
      (r) => (r.at_ms ?? 0) > (tripperCreates[2]?.at_ms ?? 0) && (r.at_ms ?? 0) < openUntil,
    ),
  ).toEqual([]);
  expect(b.ledger().effects.filter((e) => e.operation === 'create')).toHaveLength(2 * 4 + 2);

  await pair.stop();
  console.info(
    `redis outage: 4 payments succeeded while Redis was down; both processes logged the fallback and the return; after it, the child's trip (${tripperCreates.length} creates) held this process's create until +${(heldCreates()[0]?.at_ms ?? 0) - (openUntil - OPEN_MS)} ms after the trip (open ${OPEN_MS} ms)`,
  );
});
