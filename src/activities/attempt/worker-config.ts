/**
 * The payment's recorded view of a provider against this worker's: a worker whose adapter differs refuses to send, and
 * a local first attempt's failure carries the worker's view back to the workflow.
 */
import { ApplicationFailure } from '@temporalio/common';
import { msToNumber } from '@temporalio/common/lib/time';
import type { Logger } from 'pino';
import { ErrorType } from '../../domain/errors';
import type { WorkerProviderConfig } from '../../domain/provider-payment';
import type { AttemptRecord, ProviderOperation } from '../../domain/retry';
import { NotSentError } from '../../providers/errors';
import type { PaymentProvider, ProviderCapabilities } from '../../providers/types';
import type { WorkerConfigDetail } from '../contract';

/**
 * Why the payment's recorded view of a provider is not this worker's, or undefined when it is: idempotency keys and
 * their lifetime decide whether a retry is safe, and the call limits decide the attempt timeout.
 */
export function capabilitiesDiffer(provider: PaymentProvider, expected: ProviderCapabilities): string | undefined {
  const actual = provider.capabilities;
  const same =
    actual.idempotencyKeys === expected.idempotencyKeys &&
    actual.keyTtlSeconds === expected.keyTtlSeconds &&
    actual.lookupByKey === expected.lookupByKey &&
    actual.lookupByReference === expected.lookupByReference &&
    (expected.callLimits === undefined ||
      (actual.callLimits?.callTimeoutMs === expected.callLimits.callTimeoutMs &&
        actual.callLimits.referencePages === expected.callLimits.referencePages));
  return same
    ? undefined
    : `provider "${provider.name}": the capabilities the payment was started with differ from this worker's (check the PROVIDER_* settings of the workers)`;
}

/**
 * This worker refuses to send for a payment configured otherwise. With nothing sent before (no earlier attempt, no
 * local first attempt that may have left, no unknown outcome on the key), that is a refusal before any attempt: a
 * final `ValidationError` saying nothing was sent. Once an earlier attempt may have been sent, the payment's outcome is
 * the provider's, not ours to call failed: a retryable NotSent (`worker_config_mismatch`) carrying that record, so
 * the next attempt may land on a worker that matches, and a budget spent on refusals ends with `everSent` and the
 * workflow reconciles.
 */
export function refuseToSend(
  operation: ProviderOperation,
  why: string,
  record: AttemptRecord,
  classify: (err: unknown) => ApplicationFailure,
  close: () => void,
  log: Logger,
): ApplicationFailure {
  if (!record.everSent) {
    log.warn({ outcome: ErrorType.ValidationError }, why);
    return ApplicationFailure.create({
      type: ErrorType.ValidationError,
      message: `${why}; nothing was sent`,
      nonRetryable: true,
      // `at`: when it refused (ProviderFailureInfo.at says why the payment's view takes it).
      details: [{ everSent: false, everUnknown: false, sends: 0, at: new Date().toISOString() }],
    });
  }
  // Keep what earlier attempts did for the next one, closed by this attempt (it sent nothing).
  close();
  const failure = classify(new NotSentError({ operation, reason: 'worker_config_mismatch' }));
  log.warn({ outcome: ErrorType.NotSent, failure: failure.type, nextRetryDelay: failure.nextRetryDelay }, why);
  return failure;
}

/**
 * A local first attempt's failure, as it was, with the worker's view of the provider appended to its details: the
 * workflow reads the attempt record from the first detail as from any create failure, and its configuration from this.
 */
export function withWorkerConfig(err: unknown, workerConfig: WorkerProviderConfig, rerunOfLost = false): unknown {
  if (!(err instanceof ApplicationFailure)) return err;
  return withDetail(err, {
    workerConfig,
    ...(err.nonRetryable || err.nextRetryDelay == null ? {} : { retryDelayMs: msToNumber(err.nextRetryDelay) }),
    ...(rerunOfLost ? { rerunOfLost: true as const } : {}),
  } satisfies WorkerConfigDetail);
}

/** An activity's failure, as it was, with `detail` appended to its details (the first detail stays the first). */
export function withDetail(err: unknown, detail: object): unknown {
  if (!(err instanceof ApplicationFailure)) return err;
  return ApplicationFailure.create({
    ...(err.type == null ? {} : { type: err.type }),
    message: err.message,
    nonRetryable: err.nonRetryable === true,
    ...(err.nextRetryDelay == null ? {} : { nextRetryDelay: err.nextRetryDelay }),
    ...(err.cause === undefined ? {} : { cause: err.cause }),
    details: [...(err.details ?? [undefined]), detail],
  });
}
