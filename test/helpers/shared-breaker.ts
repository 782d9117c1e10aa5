/**
 * The set-up of the multi-process breaker tests (shared breaker, shared cool-down, Redis outage): the run's dev server
 * and a redis-server for the file, a world per test, and two worker processes sharing one breaker store through Redis:
 * this one (src/stack.ts's workers) and a child (test/helpers/worker-process.ts), both with `createBreaker`.
 */
import { randomUUID } from 'node:crypto';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import pino, { type Logger } from 'pino';
import type { BreakerObserver, CircuitBreaker } from '../../src/breaker';
import { RedisCircuitBreaker, closeBreakerRedis, connectBreakerRedis } from '../../src/breaker/redis';
import { createBreaker, startStack } from '../../src/stack';
import { type RunningRedis, startRedisServer } from '../../scripts/lib/redis-server';
import { workflowBundle } from './payments';
import { type World, type WorldOptions, startWorld } from './world';
import { workflowBundlePath } from './workflow-bundle';
import { DEV_SERVER_ADDRESS_ENV, connectDevServer } from './servers';
import {
  type WorkerProcess,
  type WorkerProcessSpec,
  counted,
  simulatorProvider,
  spawnWorkerProcess,
} from './worker-process';

/** The breaker policy both processes run with. */
export type BreakerPolicy = WorkerProcessSpec['breaker'];

/** The test log (silent unless TEST_LOG_LEVEL). */
export const testLogger = pino({ level: process.env.TEST_LOG_LEVEL ?? 'silent' });

/** A file's dev server and redis-server, and each test's world and clean-ups. */
export interface RedisFixture {
  readonly env: TestWorkflowEnvironment;
  /** The current redis-server. */
  readonly redis: RunningRedis;
  /** Starts a world on {@link env}; closed after the test. */
  world(opts?: WorldOptions): Promise<World>;
  /** Runs after the test, last registered first. */
  cleanup(fn: () => Promise<void>): void;
  /** A new, empty redis-server on the same port as the current one (after it was killed). */
  restartRedis(): Promise<RunningRedis>;
}

/** Registers the file's hooks: dev server and redis-server for the file, world and clean-ups after each test. */
export function redisFixture(): RedisFixture {
  let env: TestWorkflowEnvironment | undefined;
  let redis: RunningRedis | undefined;
  const worlds: World[] = [];
  const cleanups: (() => Promise<void>)[] = [];
  const afterTest = async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
    for (const w of worlds.splice(0)) await w.close();
  };
  beforeAll(async () => {
    [env, redis] = await Promise.all([connectDevServer(), startRedisServer()]);
  });
  afterEach(afterTest);
  afterAll(async () => {
    await afterTest();
    await env?.teardown();
    await redis?.stop();
  });
  const need = <T>(value: T | undefined, what: string): T => {
    if (value === undefined) throw new Error(`no ${what} outside a test`);
    return value;
  };
  const world = async (opts?: WorldOptions): Promise<World> => {
    const w = await startWorld(need(env, 'Temporal environment'), opts);
    worlds.push(w);
    return w;
  };
  return {
    get env() {
      return need(env, 'Temporal environment');
    },
    get redis() {
      return need(redis, 'redis-server');
    },
    world,
    cleanup: (fn) => void cleanups.push(fn),
    async restartRedis() {
      redis = await startRedisServer({ port: need(redis, 'redis-server').port });
      return redis;
    },
  };
}

/** A view of the shared breaker's state in Redis, over a connection of its own (closed after the test). */
export function observeBreaker(fx: RedisFixture, policy: BreakerPolicy, keyPrefix: string): RedisCircuitBreaker {
  const client = connectBreakerRedis(fx.redis.url);
  fx.cleanup(() => closeBreakerRedis(client));
  return new RedisCircuitBreaker(client, { ...policy, keyPrefix });
}

/** The two worker processes of a test. */
export interface WorkerPair {
  /** The Redis key prefix both breakers share. */
  readonly keyPrefix: string;
  /** The child process (its log, its creates). */
  readonly child: WorkerProcess;
  /** Drains this process's workers and stops the child; answers the child's creates. Idempotent. */
  stop(): Promise<number>;
}

/** Options of {@link startWorkerPair}. */
export interface WorkerPairOptions {
  readonly policy: BreakerPolicy;
  /** This process's task queue; default the world's. */
  readonly here?: string;
  /** The child's task queue; default the world's. */
  readonly there?: string;
  /** This process's breaker log (default the test log) and its observer (e.g. store switches). */
  readonly breakerLogger?: Logger;
  readonly observer?: BreakerObserver;
  /** The child's log level (its log is read with `child.logs()`); default silent. */
  readonly childLogLevel?: string;
  /** Counts the creates this process sends. */
  readonly calls?: { creates: number };
}

/**
 * Starts this process's workers (with `createBreaker` over the fixture's Redis) and a child worker process with the
 * same policy and key prefix, both polling; everything is stopped and closed after the test.
 */
export async function startWorkerPair(fx: RedisFixture, b: World, opts: WorkerPairOptions): Promise<WorkerPair> {
  const keyPrefix = `e2e:${randomUUID()}:`;
  const made = await createBreaker(
    { REDIS_URL: fx.redis.url, REDIS_KEY_PREFIX: keyPrefix, breaker: opts.policy },
    opts.breakerLogger ?? testLogger,
    opts.observer,
  );
  fx.cleanup(made.close);
  const bundlePath = await workflowBundlePath();
  const [child, here] = await Promise.all([
    spawnWorkerProcess({
      temporalAddress: process.env[DEV_SERVER_ADDRESS_ENV] ?? '',
      taskQueue: opts.there ?? b.taskQueue,
      workflowBundlePath: bundlePath,
      simulatorUrl: b.sim.url,
      apiKey: b.apiKey,
      redisUrl: fx.redis.url,
      keyPrefix,
      breaker: opts.policy,
      ...(opts.childLogLevel === undefined ? {} : { logLevel: opts.childLogLevel }),
    }),
    startWorkersHere(fx, b, made.breaker, { ...opts, here: opts.here ?? b.taskQueue }),
  ]);
  let stopped: Promise<number> | undefined;
  const stop = () =>
    (stopped ??= (async () => {
      await here.close();
      return child.stop();
    })());
  fx.cleanup(async () => void (await stop().catch(() => undefined)));
  return { keyPrefix, child, stop };
}

/**
 * This process's workers on `here` with `breaker`, over their own simulator adapter (closed after the test); `close()`
 * drains them.
 */
export async function startWorkersHere(
  fx: RedisFixture,
  b: World,
  breaker: CircuitBreaker,
  opts: { readonly here?: string; readonly calls?: { creates: number } } = {},
): Promise<{ close(): Promise<void> }> {
  const provider = simulatorProvider(b.sim.url, b.apiKey, testLogger);
  fx.cleanup(() => provider.close());
  const stack = await startStack({
    logger: testLogger,
    namespace: fx.env.namespace ?? 'default',
    taskQueue: opts.here ?? b.taskQueue,
    nativeConnection: fx.env.nativeConnection,
    workers: {
      providers: { simulator: opts.calls ? counted(provider, opts.calls) : provider },
      workflows: { workflowBundle: await workflowBundle() },
      breaker,
    },
  });
  fx.cleanup(() => stack.close());
  return stack;
}
