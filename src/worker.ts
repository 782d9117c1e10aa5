/**
 * The worker process: one worker on the workflow task queue, plus one activity worker per provider on that
 * provider's own task queue (bulkheads: a slow provider exhausts only its own slots).
 */
import { Client } from '@temporalio/client';
import { NativeConnection, Worker, type WorkerOptions } from '@temporalio/worker';
import pino, { type Logger } from 'pino';
import { type Activities, type CircuitBreaker, InMemoryCircuitBreaker, createActivities } from './activities';
import { type SweepActivities, createSweepActivities } from './activities/sweep';
import { loadConfig } from './config';
import { providerTaskQueue } from './domain/ids';
import { connectionOptions } from './temporal-connection';
import { createProvider } from './providers';
import type { PaymentProvider } from './providers/types';
import { ensureSweepSchedule } from './schedules';

export interface WorkerSetup {
  readonly connection: NativeConnection;
  readonly namespace: string;
  readonly taskQueue: string;
  readonly providers: Readonly<Record<string, PaymentProvider>>;
  readonly logger: Logger;
  /** A prebuilt bundle (production) or the path to bundle at start-up (development, tests). */
  readonly workflows: Pick<WorkerOptions, 'workflowBundle'> | Pick<WorkerOptions, 'workflowsPath'>;
  /** Extra activities (e.g. the sweep's visibility queries) registered beside the provider activities. */
  readonly activities?: Partial<Activities> & Partial<SweepActivities>;
  /** Per-provider circuit breaker; default one in-memory breaker for this process. */
  readonly breaker?: CircuitBreaker;
  readonly maxConcurrentActivityTaskExecutions?: number;
  /**
   * The workflow worker's cache of open workflows (SDK default: sized from the heap limit, ~2300 with a 4 GiB heap) and
   * whether they share one V8 context (SDK default true). Each cached payment holds its workflow state in memory;
   * `npm run bench -- --memory` measures what one costs.
   */
  readonly workflowCache?: Pick<WorkerOptions, 'maxCachedWorkflows' | 'reuseV8Context'>;
}

/** Builds the workflow worker and one activity worker per provider. */
export async function createWorkers(setup: WorkerSetup): Promise<Worker[]> {
  const breaker = setup.breaker ?? new InMemoryCircuitBreaker();
  const activities = {
    ...createActivities({ providers: setup.providers, logger: setup.logger, breaker }),
    ...setup.activities,
  };
  const workflowWorker = await Worker.create({
    connection: setup.connection,
    namespace: setup.namespace,
    taskQueue: setup.taskQueue,
    ...setup.workflows,
    ...setup.workflowCache,
    // Local activities (describeProvider) run here, beside the workflows.
    activities,
  });
  const providerWorkers = await Promise.all(
    Object.keys(setup.providers).map((name) =>
      Worker.create({
        connection: setup.connection,
        namespace: setup.namespace,
        taskQueue: providerTaskQueue(setup.taskQueue, name),
        activities,
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

async function main() {
  const config = loadConfig();
  const logger = pino({ level: config.LOG_LEVEL, base: { component: 'worker' } });
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
  const client = new Client({ connection, namespace: config.TEMPORAL_NAMESPACE });
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
  });
  const sweep = await ensureSweepSchedule(client, {
    taskQueue: config.TASK_QUEUE,
    intervalMs: config.SWEEP_INTERVAL_MS,
    lookbackMs: config.SWEEP_LOOKBACK_MS,
    unknownThresholdMs: config.timings.unknownSweepThresholdMs,
    providers: Object.keys(providers),
  });
  logger.info(sweep, 'reconcile sweep schedule');
  logger.info({ taskQueue: config.TASK_QUEUE, providers: Object.keys(providers) }, 'worker running');
  try {
    await runWorkers(workers);
  } finally {
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
