/**
 * The shared breaker end to end, in real time on the dev server: two workers (two Worker sets on one task queue, each
 * with its own provider client and its own breaker client) against the simulator answering every create with a 503.
 * After the trip the ledger's create requests stop; each open period ends in exactly one probe across both workers;
 * when the provider is healthy again the probe closes the breaker for both and every charge succeeds once.
 * Run once with the Redis store (one redis-server, two connections: two processes) and once with one in-process
 * breaker shared by both Worker sets (one process).
 */
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import pino from 'pino';
import { type CircuitBreaker, type InspectableBreaker, InMemoryCircuitBreaker } from '../../src/activities';
import { RedisCircuitBreaker, closeBreakerRedis, connectBreakerRedis } from '../../src/activities/breaker-redis';
import { createProvider, simulatorCapabilities } from '../../src/providers';
import { createBreaker, createWorkers } from '../../src/worker';
import { type RunningRedis, startRedisServer } from '../../scripts/lib/redis-server';
import { type Bench, chargeRequest, startBench, workflowBundle } from '../helpers/payments';
import { DEV_SERVER_ADDRESS_ENV, connectDevServer } from '../helpers/servers';
import { type WorkerProcessSpec, counted } from '../helpers/worker-process';
import { effectsOf, requestsOf, startCharge, waitForStatus } from '../helpers/workflows';

let env: TestWorkflowEnvironment;
let redis: RunningRedis;
let bench: Bench | undefined;
const cleanups: (() => Promise<void>)[] = [];

beforeAll(async () => {
  [env, redis] = await Promise.all([connectDevServer(), startRedisServer()]);
});
afterAll(async () => {
  await env?.teardown();
  await redis?.stop();
});
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
  await bench?.close();
  bench = undefined;
});

const logger = pino({ level: process.env.TEST_LOG_LEVEL ?? 'silent' });
const OPEN_MS = 3_000;
const policy = {
  failureThreshold: 3,
  // The window's rate rule stays out of this test: the consecutive rule trips.
  window: { durationMs: 60_000, failureRate: 1, minimumCalls: 1_000_000 },
  cooldownMs: OPEN_MS,
  probeTimeoutMs: 5_000,
  jitterMs: 200,
};

const until = async <T>(what: string, check: () => Promise<T | undefined>, timeoutMs = 30_000): Promise<T> => {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
};

/** A second worker process (test/helpers/worker-process.ts) on the same task queue and Redis. */
async function spawnWorkerProcess(spec: WorkerProcessSpec): Promise<{ stop(): Promise<number> }> {
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(__dirname, '../helpers/worker-process.ts')], {
    env: { ...process.env, PW_WORKER_SPEC: JSON.stringify(spec) },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('worker process not ready within 90 s')), 90_000);
    child.stdout.on('data', (c: Buffer) => {
      out += c.toString();
      if (out.includes('ready\n')) {
        clearTimeout(timer);
        resolve();
      }
    });
    void exited.then((code) => reject(new Error(`worker process exited ${code} before ready`)));
  });
  return {
    async stop() {
      child.kill('SIGTERM');
      const code = await exited;
      if (code !== 0) throw new Error(`worker process exited ${code}`);
      const line = out.split('\n').find((l) => l.startsWith('{'));
      return (JSON.parse(line ?? '{}') as { creates: number }).creates;
    },
  };
}

describe.each([
  ['Redis store, two worker processes', 'redis'],
  ['in-process store, one worker process', 'in-process'],
] as const)('%s', (name, store) => {
  it('after the trip the workers stop calling; one probe per open period; the probe closes it for all', async () => {
    const b = (bench = await startBench(env, { totalTimeoutMs: 2_000 }));
    const keyPrefix = `e2e:${randomUUID()}:`;
    let breaker: CircuitBreaker;
    let observer: InspectableBreaker;
    let other: { stop(): Promise<number> } | undefined;
    if (store === 'redis') {
      const made = await createBreaker({ REDIS_URL: redis.url, REDIS_KEY_PREFIX: keyPrefix, breaker: policy }, logger);
      const observerClient = connectBreakerRedis(redis.url);
      cleanups.push(made.close, () => closeBreakerRedis(observerClient));
      breaker = made.breaker;
      observer = new RedisCircuitBreaker(observerClient, { ...policy, keyPrefix });
      const bundlePath = path.join(os.tmpdir(), `pw-bundle-${randomUUID()}.js`);
      writeFileSync(bundlePath, (await workflowBundle()).code);
      cleanups.push(async () => rmSync(bundlePath, { force: true }));
      other = await spawnWorkerProcess({
        temporalAddress: process.env[DEV_SERVER_ADDRESS_ENV] ?? '',
        taskQueue: b.taskQueue,
        workflowBundlePath: bundlePath,
        simulatorUrl: b.sim.url,
        apiKey: b.apiKey,
        redisUrl: redis.url,
        keyPrefix,
        breaker: policy,
      });
    } else {
      const shared = new InMemoryCircuitBreaker(policy);
      breaker = shared;
      observer = shared;
    }
    const calls = { creates: 0 };
    const provider = createProvider({
      name: 'simulator',
      baseUrl: b.sim.url,
      apiKey: b.apiKey,
      capabilities: simulatorCapabilities(86_400),
      connectTimeoutMs: 1_000,
      totalTimeoutMs: 2_000,
      logger,
    });
    cleanups.push(() => provider.close());
    const workers = await createWorkers({
      connection: env.nativeConnection,
      namespace: env.namespace ?? 'default',
      taskQueue: b.taskQueue,
      providers: { simulator: counted(provider, calls) },
      logger,
      workflows: { workflowBundle: await workflowBundle() },
      breaker,
    });
    const running = workers.map((w) => w.run());
    let otherCreates = 0;
    try {
      b.sim.addFaults({ rules: [{ match: { operation: 'create' }, fault: 'status', status: 503 }] });
      const retry = {
        create: { budgetMs: 90_000, attemptTimeoutMs: 5_000, initialIntervalMs: 100, maximumIntervalMs: 200 },
      };
      const charge = async () => (await startCharge(b, b.input(chargeRequest(), { retry }))).handle;
      // One charge trips it (its attempts are sequential, so nothing is in flight at the trip)...
      const handles = [await charge()];
      const creates = () => requestsOf(b, 'create');
      const between = (from: number, to: number) =>
        creates().filter((r) => (r.at_ms ?? 0) > from && (r.at_ms ?? 0) < to);

      const first = await until('the trip', async () => {
        const s = await observer.state('simulator');
        return s.kind === 'open' ? s.until : undefined;
      });
      const trippedAt = first - OPEN_MS;
      const beforeTrip = creates().length;
      expect(beforeTrip).toBe(3);
      // ...three more start while it is open: their first attempts never leave.
      handles.push(...(await Promise.all([charge(), charge(), charge()])));
      // The failed probe re-opens it: a later `until`.
      const second = await until('the failed probe to re-open it', async () => {
        const s = await observer.state('simulator');
        return s.kind === 'open' && s.until > first ? s.until : undefined;
      });
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
      for (const w of workers) w.shutdown();
      await Promise.all(running);
      otherCreates = (await other?.stop()) ?? 0;
      other = undefined;
      expect(calls.creates + otherCreates).toBe(creates().length);
      console.info(
        `${name}: creates before the trip ${beforeTrip}, during open periods 0, probes 2 (503 then 200), after close ${afterReopen.length - 1}; per process ${calls.creates} + ${otherCreates}; open ${trippedAt}..${first}, re-opened ${second - OPEN_MS}..${second}`,
      );
    } finally {
      for (const w of workers) if (w.getState() === 'RUNNING') w.shutdown();
      await Promise.all(running);
      await other?.stop().catch(() => undefined);
    }
  });
});
