/**
 * The worker process: one worker on the workflow task queue, plus one activity worker per provider on that
 * provider's own task queue (bulkheads: a slow provider exhausts only its own slots), each with its own rate and
 * concurrency limits, and one circuit breaker per provider: shared through Redis when REDIS_URL is set.
 */
import { Client } from '@temporalio/client';
import type { DataConverter } from '@temporalio/common';
import { NativeConnection, Worker, type WorkerOptions } from '@temporalio/worker';
import { Registry, collectDefaultMetrics } from 'prom-client';
import pino, { type Logger as PinoLogger } from 'pino';
import {
  type Activities,
  type BreakerObserver,
  type CircuitBreaker,
  type InspectableBreaker,
  InMemoryCircuitBreaker,
  createActivities,
} from './activities';
import { type SweepActivities, createSweepActivities } from './activities/sweep';
import { FallbackCircuitBreaker } from './activities/breaker-fallback';
import { RedisCircuitBreaker, closeBreakerRedis, connectBreakerRedis, redisReady } from './activities/breaker-redis';
import { encryptingDataConverter } from './codec';
import { type Config, type ProviderLimits, loadConfig } from './config';
import { providerTaskQueue } from './domain/ids';
import { connectionOptions } from './temporal-connection';
import { createConfiguredProviders } from './providers';
import type { PaymentProvider } from './providers/types';
import { ensureSweepSchedule } from './schedules';
import { installWorkerRuntime } from './metrics/runtime';
import { parseListenAddress, serveMetrics } from './metrics/serve';
import {
  type WorkerMetrics,
  breakerMetricsObserver,
  createWorkerMetrics,
  paymentSinks,
  providerCallInterceptor,
} from './metrics/worker-metrics';

export interface WorkerSetup {
  readonly connection: NativeConnection;
  readonly namespace: string;
  readonly taskQueue: string;
  readonly providers: Readonly<Record<string, PaymentProvider>>;
  readonly logger: PinoLogger;
  /** A prebuilt bundle (production) or the path to bundle at start-up (development, tests). */
  readonly workflows: Pick<WorkerOptions, 'workflowBundle'> | Pick<WorkerOptions, 'workflowsPath'>;
  /** Extra activities (e.g. the sweep's visibility queries) registered beside the provider activities. */
  readonly activities?: Partial<Activities> & Partial<SweepActivities>;
  /** Per-provider circuit breaker; default one in-memory breaker for this process. */
  readonly breaker?: CircuitBreaker;
  /** Default per-worker concurrency of each provider's activity worker (a provider's own limit wins). */
  readonly maxConcurrentActivityTaskExecutions?: number;
  /**
   * The workflow worker's cache of open workflows (SDK default: sized from the heap limit, ~2300 with a 4 GiB heap) and
   * whether they share one V8 context (SDK default true). Each cached payment holds its workflow state in memory;
   * `npm run bench -- --memory` measures what one costs.
   */
  readonly workflowCache?: Pick<WorkerOptions, 'maxCachedWorkflows' | 'reuseV8Context'>;
  /** Per provider: fleet-wide activities per second (server-enforced) and this worker's concurrency. */
  readonly providerLimits?: Readonly<Record<string, ProviderLimits>>;
  /** Payload encryption (src/codec); default none. Clients of the same workflows must use the same one. */
  readonly dataConverter?: DataConverter;
  /** Where provider calls and reconciles are counted; default a registry of their own. */
  readonly metrics?: WorkerMetrics;
}

/** Builds the workflow worker and one activity worker per provider. */
export async function createWorkers(setup: WorkerSetup): Promise<Worker[]> {
  const breaker = setup.breaker ?? new InMemoryCircuitBreaker();
  const activities = {
    ...createActivities({ providers: setup.providers, logger: setup.logger, breaker }),
    ...setup.activities,
  };
  const metrics = setup.metrics ?? createWorkerMetrics(new Registry());
  // Metrics and encryption: the same on every worker of the process.
  const common = {
    ...(setup.dataConverter === undefined ? {} : { dataConverter: setup.dataConverter }),
    interceptors: { activity: [providerCallInterceptor(metrics)] },
  };
  const workflowWorker = await Worker.create({
    connection: setup.connection,
    namespace: setup.namespace,
    taskQueue: setup.taskQueue,
    ...setup.workflows,
    ...setup.workflowCache,
    // Local activities (describeProvider) run here, beside the workflows.
    activities,
    ...common,
    sinks: paymentSinks(metrics),
  });
  const providerWorkers = await Promise.all(
    Object.keys(setup.providers).map((name) => {
      const limits = setup.providerLimits?.[name];
      return Worker.create({
        connection: setup.connection,
        namespace: setup.namespace,
        taskQueue: providerTaskQueue(setup.taskQueue, name),
        activities,
        ...common,
        maxConcurrentActivityTaskExecutions: limits?.maxConcurrency ?? setup.maxConcurrentActivityTaskExecutions ?? 50,
        // The Temporal server hands out at most this many of the queue's activities per second, to all workers.
        ...(limits?.maxRps === undefined ? {} : { maxTaskQueueActivitiesPerSecond: limits.maxRps }),
      });
    }),
  );
  return [workflowWorker, ...providerWorkers];
}

/**
 * The breaker of this worker process: with REDIS_URL, the Redis store shared by every worker, falling back to an
 * in-process one while Redis is unreachable; without it, the in-process store alone (fine for one worker).
 */
export async function createBreaker(
  config: Pick<Config, 'REDIS_URL' | 'REDIS_KEY_PREFIX' | 'breaker'>,
  logger: PinoLogger,
  /** Hears transitions, probes, cool-downs, refusals and store switches of whichever store answers (metrics). */
  observer?: BreakerObserver,
): Promise<{ readonly breaker: CircuitBreaker; close(): Promise<void> }> {
  const policy = { ...config.breaker, ...(observer === undefined ? {} : { observer }) };
  const local = new InMemoryCircuitBreaker(policy);
  if (config.REDIS_URL === undefined) {
    logger.info({ breakerStore: 'in-process' }, 'circuit breaker: in-process store (REDIS_URL not set)');
    return { breaker: local, close: async () => undefined };
  }
  const redis = connectBreakerRedis(config.REDIS_URL, (err) => logger.debug({ err }, 'breaker Redis connection'));
  const shared = new RedisCircuitBreaker(redis, { ...policy, keyPrefix: config.REDIS_KEY_PREFIX });
  const breaker = new FallbackCircuitBreaker(shared, local, logger, observer);
  // Never block start-up on Redis: payments go on with the in-process store until it answers.
  const ready = await redisReady(redis, 2_000);
  const where = new URL(config.REDIS_URL).host; // never the password
  if (ready) logger.info({ breakerStore: 'redis', redis: where }, 'circuit breaker: shared Redis store');
  else logger.warn({ breakerStore: 'in-process', redis: where }, 'circuit breaker: Redis not reachable yet');
  return { breaker, close: () => closeBreakerRedis(redis) };
}

/** Runs workers until one fails or all are shut down (SIGINT/SIGTERM make them drain). */
export async function runWorkers(workers: Worker[]): Promise<void> {
  await Promise.all(workers.map((w) => w.run()));
}

/** Our registry (WORKER_METRICS_ADDRESS); the breaker gauge reads the process's breaker on each scrape. */
function workerMetrics(registry: Registry, breaker: CircuitBreaker, providers: readonly string[]): WorkerMetrics {
  collectDefaultMetrics({ register: registry });
  const inspectable = 'state' in breaker ? (breaker as InspectableBreaker) : undefined;
  return createWorkerMetrics(
    registry,
    inspectable ? { providers, state: async (p) => (await inspectable.state(p)).kind } : undefined,
  );
}

async function main() {
  const config = loadConfig();
  const logger = pino({ level: config.LOG_LEVEL, base: { component: 'worker' } });
  installWorkerRuntime(config);
  // Our registry first: the breaker's observer counts into it from the first call on.
  const registry = new Registry();
  const breaker = await createBreaker(config, logger, breakerMetricsObserver(registry));
  const metrics = workerMetrics(registry, breaker.breaker, config.providers);
  const dataConverter = encryptingDataConverter(config.payloadKeys);
  const connection = await NativeConnection.connect(connectionOptions(config));
  const providers = createConfiguredProviders(config, logger);
  // The sweep's activities query visibility and signal payments: a client over the worker's own connection.
  const client = new Client({ connection, namespace: config.TEMPORAL_NAMESPACE, dataConverter });
  const workers = await createWorkers({
    connection,
    namespace: config.TEMPORAL_NAMESPACE,
    taskQueue: config.TASK_QUEUE,
    providers,
    logger,
    workflows: process.env.WORKFLOW_BUNDLE_PATH
      ? { workflowBundle: { codePath: process.env.WORKFLOW_BUNDLE_PATH } }
      : { workflowsPath: require.resolve('./workflows') },
    activities: createSweepActivities({ client, logger }),
    breaker: breaker.breaker,
    providerLimits: config.providerLimits,
    dataConverter,
    metrics,
  });
  const sweep = await ensureSweepSchedule(client, {
    taskQueue: config.TASK_QUEUE,
    intervalMs: config.SWEEP_INTERVAL_MS,
    lookbackMs: config.SWEEP_LOOKBACK_MS,
    unknownThresholdMs: config.timings.unknownSweepThresholdMs,
    providers: Object.keys(providers),
    retry: config.retry,
  });
  logger.info(sweep, 'reconcile sweep schedule');
  // Served once the workers exist: `npm start` takes the endpoint's first answer as "worker ready".
  const metricsServer =
    config.WORKER_METRICS_ADDRESS === 'off'
      ? undefined
      : await serveMetrics(
          metrics.registry,
          parseListenAddress(config.WORKER_METRICS_ADDRESS).host,
          parseListenAddress(config.WORKER_METRICS_ADDRESS).port,
        );
  const sdkMetrics = config.SDK_METRICS_ADDRESS === 'off' ? 'off' : `http://${config.SDK_METRICS_ADDRESS}/metrics`;
  logger.info(
    {
      taskQueue: config.TASK_QUEUE,
      providers: Object.keys(providers),
      metrics: metricsServer?.url ?? 'off',
      sdkMetrics,
    },
    'worker running',
  );
  try {
    await runWorkers(workers);
  } finally {
    await metricsServer?.close();
    await breaker.close();
    await Promise.all(Object.values(providers).map((p) => p.close?.()));
    await connection.close();
  }
}

if (require.main === module) {
  main().then(
    () => process.exit(0),
    (err: unknown) => {
      console.error(err);
      process.exit(1);
    },
  );
}
