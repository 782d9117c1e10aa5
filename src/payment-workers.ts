/**
 * The payment workers inside another program's process (the package's `payment-workflows/worker` entry): an order
 * service registers them on its own Temporal connection, with its own providers and settings, beside its own workers.
 * The worker process (src/worker.ts) builds the same workers from the environment; both wire through src/stack.ts.
 */
import { createRequire } from 'node:module';
import type { PayloadCodec } from '@temporalio/common';
import type { NativeConnection } from '@temporalio/worker';
import { type Logger, pino } from 'pino';
import { defaultSweepIntervalMs, defaultSweepLookbackMs } from './domain/sweep';
import { type PaymentTimings, defaultPaymentTimings } from './domain/workflow-inputs';
import { walletMetricsObserver } from './metrics/wallet-metrics';
import type { PaymentDatabase } from './payment-database';
import { type EnsuredSchedule, ensureSweepSchedule } from './schedules';
import { type StackWorkers, startStack } from './stack';

/** The specifier of the prebuilt workflow bundle in the package's exports map. */
export const workflowBundleSpecifier = 'payment-workflows/workflow-bundle';

/**
 * The path of the workflow bundle the package ships (built by `npm pack` from `payment-workflows/workflows`). Resolved
 * through the package's own exports map, so it does not depend on where this module sits inside the package.
 */
export function prebuiltWorkflowBundlePath(): string {
  try {
    return createRequire(__filename).resolve(workflowBundleSpecifier);
  } catch (err) {
    throw new TypeError(
      `the prebuilt workflow bundle (${workflowBundleSpecifier}) is missing: build the package (npm run build:package) ` +
        'or pass `workflows` ({ workflowsPath: require.resolve("payment-workflows/workflows") } bundles at start)',
      { cause: err },
    );
  }
}

/** The reconcile sweep's schedule (one per task queue, kept in place at every start). */
export interface PaymentSweepOptions {
  /** How often it runs; default 10 min (`SWEEP_INTERVAL_MS`). */
  readonly intervalMs?: number;
  /** How far behind each run its provider window ends; default twice `timings.settleWindowMs`. */
  readonly lookbackMs?: number;
}

/** What {@link createPaymentWorkers} builds the workers from. */
export interface PaymentWorkersOptions extends Pick<
  StackWorkers,
  | 'providers'
  | 'breaker'
  | 'providerLimits'
  | 'retry'
  | 'workflowCache'
  | 'maxConcurrentActivityTaskExecutions'
  | 'metrics'
> {
  /** The caller's connection to Temporal; `close()` leaves it open. */
  readonly connection: NativeConnection;
  /** Default `default`. */
  readonly namespace?: string;
  /** The workflow task queue, the one the `PaymentsClient` starts payments on; providers get queues beside it. */
  readonly taskQueue: string;
  /** The `PaymentsClient`'s timings (the sweep's thresholds come from them); default {@link defaultPaymentTimings}. */
  readonly timings?: PaymentTimings;
  /** Default: info-level pino logs tagged `component: payment-workers`. */
  readonly logger?: Logger;
  /** Payload encryption; the `PaymentsClient`'s Temporal client must use the same one. Default none. */
  readonly codec?: PayloadCodec;
  /** Default the prebuilt bundle ({@link prebuiltWorkflowBundlePath}); or a bundle of your own that includes ours. */
  readonly workflows?: StackWorkers['workflows'];
  /** The reconcile sweep of stuck payments; `false` when another deployment's workers on this queue keep it. */
  readonly sweep?: PaymentSweepOptions | false;
  /**
   * The payments' database ({@link openPaymentDatabase}): its wallet ledger's activities run on `taskQueue` (payments
   * with a wallet part), and payments started with key records hand their keys' first final answers to its table.
   * Absent: no wallet activities (a wallet payment fails its first step) and no key records. The caller closes it,
   * after `close()`.
   */
  readonly database?: Pick<PaymentDatabase, 'wallets' | 'keyRecords'>;
}

/** The payment workers of a process: created, not polling until {@link PaymentWorkers.run}. */
export interface PaymentWorkers {
  /** Polls until `close()` (or the runtime's shutdown signals) drained every worker, or rejects when one failed. */
  run(): Promise<void>;
  /** Drains the workers and closes what they opened (not the caller's connection). Idempotent. */
  close(): Promise<void>;
  /** The sweep schedule as it was found and left, unless `sweep: false`. */
  readonly sweep: EnsuredSchedule | undefined;
}

/**
 * Builds the payment workers (one on `taskQueue` for the workflows, one per provider on its own queue) on the caller's
 * connection, ensures the reconcile sweep's schedule, and returns them ready to `run()`.
 */
export async function createPaymentWorkers(options: PaymentWorkersOptions): Promise<PaymentWorkers> {
  const {
    connection,
    namespace = 'default',
    taskQueue,
    timings = defaultPaymentTimings,
    sweep,
    codec,
    ...rest
  } = options;
  const { logger = pino({ base: { component: 'payment-workers' } }), workflows, database, ...workers } = rest;
  // Wallet operations count into the caller's registry beside the provider calls, when it gave one.
  const wallets =
    database && workers.metrics
      ? database.wallets.withObserver(walletMetricsObserver(workers.metrics.registry))
      : database?.wallets;
  const stack = await startStack({
    logger,
    namespace,
    taskQueue,
    nativeConnection: connection,
    ...(codec === undefined ? {} : { codec }),
    workers: {
      ...workers,
      workflows: workflows ?? { workflowBundle: { codePath: prebuiltWorkflowBundlePath() } },
      ...(wallets ? { wallets } : {}),
      ...(database ? { keyRecords: database.keyRecords } : {}),
      sweep: sweep !== false,
      start: false,
    },
  });
  try {
    await stack.createWorkers();
    const ensured =
      sweep === false || stack.workerClient === undefined
        ? undefined
        : await ensureSweepSchedule(stack.workerClient, {
            taskQueue,
            intervalMs: sweep?.intervalMs ?? defaultSweepIntervalMs,
            lookbackMs: sweep?.lookbackMs ?? defaultSweepLookbackMs(timings.settleWindowMs),
            unknownThresholdMs: timings.unknownSweepThresholdMs,
            providers: Object.keys(options.providers),
            ...(options.retry === undefined ? {} : { retry: options.retry }),
          });
    return { run: () => stack.run(), close: () => stack.close(), sweep: ensured };
  } catch (err) {
    await stack.close().catch(() => undefined);
    throw err;
  }
}
