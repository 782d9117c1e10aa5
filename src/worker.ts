/**
 * The worker process: one worker on the workflow task queue, plus one activity worker per provider on that
 * provider's own task queue (bulkheads: a slow provider exhausts only its own slots).
 */
import { Client } from '@temporalio/client';
import type { DataConverter } from '@temporalio/common';
import { NativeConnection, Worker, type WorkerOptions } from '@temporalio/worker';
import { Registry, collectDefaultMetrics } from 'prom-client';
import pino, { type Logger as PinoLogger } from 'pino';
import { type Activities, type CircuitBreaker, InMemoryCircuitBreaker, createActivities } from './activities';
import { type SweepActivities, createSweepActivities } from './activities/sweep';
import { encryptingDataConverter } from './codec';
import { loadConfig } from './config';
import { providerTaskQueue } from './domain/ids';
import { connectionOptions } from './temporal-connection';
import { createProvider } from './providers';
import type { PaymentProvider } from './providers/types';
import { ensureSweepSchedule } from './schedules';
import { installWorkerRuntime } from './metrics/runtime';
import { parseListenAddress, serveMetrics } from './metrics/serve';
import {
  type WorkerMetrics,
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
  readonly maxConcurrentActivityTaskExecutions?: number;
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
    // Local activities (describeProvider) run here, beside the workflows.
    activities,
    ...common,
    sinks: paymentSinks(metrics),
  });
  const providerWorkers = await Promise.all(
    Object.keys(setup.providers).map((name) =>
      Worker.create({
        connection: setup.connection,
        namespace: setup.namespace,
        taskQueue: providerTaskQueue(setup.taskQueue, name),
        activities,
        ...common,
        maxConcurrentActivityTaskExecutions: setup.maxConcurrentActivityTaskExecutions ?? 50,
      }),
    ),
  );
  return [workflowWorker, ...providerWorkers];
}

/** Runs workers until one fails or all are shut down (SIGINT/SIGTERM make them drain). */
export async function runWorkers(workers: Worker[]): Promise<void> {
  await Promise.all(workers.map((w) => w.run()));
}

/** Our registry (WORKER_METRICS_ADDRESS); the breaker gauge reads the process's breaker on each scrape. */
function workerMetrics(breaker: InMemoryCircuitBreaker, providers: readonly string[]): WorkerMetrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  return createWorkerMetrics(registry, { providers, state: (p) => breaker.state(p).kind });
}

async function main() {
  const config = loadConfig();
  const logger = pino({ level: config.LOG_LEVEL, base: { component: 'worker' } });
  installWorkerRuntime(config);
  const breaker = new InMemoryCircuitBreaker();
  const metrics = workerMetrics(breaker, config.providers);
  const dataConverter = encryptingDataConverter(config.payloadKeys);
  const connection = await NativeConnection.connect(connectionOptions(config));
  const providers = {
    simulator: createProvider(
      {
        name: 'simulator',
        baseUrl: config.SIMULATOR_URL,
        apiKey: config.PROVIDER_API_KEY,
        capabilities: config.providerCapabilities,
        connectTimeoutMs: config.PROVIDER_CONNECT_TIMEOUT_MS,
        totalTimeoutMs: config.PROVIDER_TOTAL_TIMEOUT_MS,
      },
      logger,
    ),
  };
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
    breaker,
    dataConverter,
    metrics,
  });
  const sweep = await ensureSweepSchedule(client, {
    taskQueue: config.TASK_QUEUE,
    intervalMs: config.SWEEP_INTERVAL_MS,
    lookbackMs: config.SWEEP_LOOKBACK_MS,
    unknownThresholdMs: config.timings.unknownSweepThresholdMs,
    providers: Object.keys(providers),
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
