/**
 * The worker process: one worker on the workflow task queue, plus one activity worker per provider on that
 * provider's own task queue (bulkheads: a slow provider exhausts only its own slots), each with its own rate and
 * concurrency limits, and one circuit breaker per provider: shared through Redis when REDIS_URL is set. Wired by
 * src/stack.ts, as the API process, the tests and the bench are; exits 1 on a start-up error, drains on SIGINT/SIGTERM.
 */
import pino from 'pino';
import { loadConfig } from './config';
import { installWorkerRuntime } from './metrics/runtime';
import { parseListenAddress, serveMetrics } from './metrics/serve';
import { checkWorkerCapacity, ensureSweepScheduleWithin, startConfiguredStack } from './stack';

async function main() {
  const config = loadConfig();
  const logger = pino({ level: config.LOG_LEVEL, base: { component: 'worker' } });
  // Before anything connects: slots that cannot keep the retry presets' promises under a full queue.
  checkWorkerCapacity(config, logger);
  installWorkerRuntime(config);
  const stack = await startConfiguredStack(config, logger, { workers: true });
  const { providers, workerClient, workerMetrics } = stack;
  if (workerClient === undefined || workerMetrics === undefined) throw new TypeError('a worker stack has workers');
  // Connected is not serving: while Temporal's database restarts, the frontend answers (NamespaceNotFoundError,
  // Unavailable), so the schedule waits as the connect does instead of the process exiting into its crash budget.
  const sweep = await ensureSweepScheduleWithin(
    workerClient,
    {
      taskQueue: config.TASK_QUEUE,
      intervalMs: config.SWEEP_INTERVAL_MS,
      lookbackMs: config.SWEEP_LOOKBACK_MS,
      unknownThresholdMs: config.timings.unknownSweepThresholdMs,
      providers: Object.keys(providers),
      retry: config.retry,
    },
    { waitMs: config.TEMPORAL_CONNECT_WAIT_MS, address: config.TEMPORAL_ADDRESS, logger },
  );
  logger.info(sweep, 'reconcile sweep schedule');
  // Served once the workers exist: `npm start` takes the endpoint's first answer as "worker ready".
  const metricsServer =
    config.WORKER_METRICS_ADDRESS === 'off'
      ? undefined
      : await serveMetrics(
          workerMetrics.registry,
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
    await stack.run();
  } finally {
    await metricsServer?.close();
    await stack.close();
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
