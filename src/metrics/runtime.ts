/**
 * The worker process's Temporal SDK runtime: its Prometheus exporter and its logger.
 */
import { ApplicationFailure, type LogLevel, type LogMetadata, type Logger } from '@temporalio/common';
import { DefaultLogger, Runtime, makeTelemetryFilterString } from '@temporalio/worker';
import type { Config } from '../config';
import { ErrorType, ProviderFailureTypes } from '../domain/errors';

/**
 * The SDK runtime, installed before anything creates it: its Prometheus exporter (SDK_METRICS_ADDRESS) and its logger,
 * at WARN unless LOG_LEVEL is debug or trace, so the worker's start-up (webpack's bundle report, lifecycle lines)
 * stays out of `npm start` while warnings and errors still show.
 */
export function installWorkerRuntime(config: Pick<Config, 'LOG_LEVEL' | 'SDK_METRICS_ADDRESS'>): void {
  const level = ['debug', 'trace'].includes(config.LOG_LEVEL) ? 'DEBUG' : 'WARN';
  const classified = new Set<string>([...ProviderFailureTypes, ErrorType.BudgetExhausted]);
  // Two expected warnings left out: an activity-only worker polls no workflows (by design: the bulkheads), and a typed
  // provider failure, which the activity already logged as one classified line (the SDK would add its stack).
  const expected = (message: string, meta?: LogMetadata) =>
    message.startsWith('No workflows registered') ||
    (message === 'Activity failed' &&
      meta?.error instanceof ApplicationFailure &&
      classified.has(meta.error.type ?? ''));
  const base = new DefaultLogger(level);
  const log = (l: LogLevel) => (message: string, meta?: LogMetadata) => {
    if (!expected(message, meta)) base.log(l, message, meta);
  };
  const logger: Logger = {
    log: (l, message, meta) => log(l)(message, meta),
    trace: log('TRACE'),
    debug: log('DEBUG'),
    info: log('INFO'),
    warn: log('WARN'),
    error: log('ERROR'),
  };
  Runtime.install({
    logger,
    telemetryOptions: {
      logging: { filter: makeTelemetryFilterString({ core: level }), forward: {} },
      ...(config.SDK_METRICS_ADDRESS === 'off'
        ? {}
        : { metrics: { prometheus: { bindAddress: config.SDK_METRICS_ADDRESS } } }),
    },
  });
}
