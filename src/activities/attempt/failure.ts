/**
 * The classify step of the attempt pipeline: whatever a provider call threw becomes the one ApplicationFailure Temporal
 * sees, typed by its outcome class (docs/architecture.md#outcome-classes), with what the attempts did in its details.
 */
import { ApplicationFailure } from '@temporalio/common';
import { ErrorType, type ProviderFailureType } from '../../domain/errors';
import {
  RejectedAfterUnknown,
  computeRetryDelayMs,
  type AttemptRecord,
  type OperationSafety,
  type ProviderOperation,
  type RetryDelay,
  type RetrySpec,
} from '../../domain/retry';
import { OutcomeUnknownError, isProviderError, isProviderErrorOfType } from '../../providers/errors';
import type { ProviderFailureDetails } from '../../providers/types';

/** What the attempts of one activity execution did, as its failures report it. */
export interface AttemptHistory {
  /** Whether any attempt (this one included) may have sent the write: false means the provider never saw it. */
  readonly everSent: boolean;
  /** Whether any attempt's outcome was unknown. */
  readonly everUnknown: boolean;
  /** How many of this activity's attempts may have reached the provider with the write (what the view counts). */
  readonly sends?: number;
  /** What the earlier attempts left in the heartbeat details, as this attempt read them (absent on attempt 1). */
  readonly earlier?: AttemptRecord;
}

/** `details[0]` of every provider failure an activity throws: the provider's classification plus where it happened. */
export type ProviderFailureInfo = ProviderFailureDetails &
  Partial<AttemptHistory> & {
    readonly provider: string;
    readonly attempt: number;
    /**
     * When the attempt failed (this worker's clock). Recorded with the failure, so a workflow that marks its payment
     * from it stamps the same time in every replay and in a query that applied it ahead of its task (absent before).
     */
    readonly at?: string;
  };

/** `details[0]` of a `BudgetExhausted` failure; its `cause` is the last provider failure. */
export interface BudgetExhaustedInfo {
  readonly type: typeof ErrorType.BudgetExhausted;
  readonly operation: ProviderOperation;
  readonly provider: string;
  readonly attempt: number;
  readonly elapsedMs: number;
  /** `budget`: no attempt fits; `retry-after`: the provider asked for more time than is left; `attempts`: maximumAttempts. */
  readonly reason: 'budget' | 'attempts' | 'retry-after';
  readonly lastFailureType: ProviderFailureType;
  readonly everSent?: boolean;
  readonly everUnknown?: boolean;
  readonly sends?: number;
  /** When the activity gave up (this worker's clock), as {@link ProviderFailureInfo.at}. */
  readonly at?: string;
}

export interface ClassifyContext {
  readonly operation: ProviderOperation;
  readonly safety: OperationSafety;
  readonly provider: string;
  readonly attempt: number;
  readonly spec: RetrySpec;
  readonly elapsedMs: number;
  readonly random: () => number;
  /** For writes: what the attempts did (goes into the failure details). */
  readonly history?: AttemptHistory;
}

/** Failure details of any thrown value: a ProviderError's own, or OutcomeUnknown for anything unexpected. */
export const failureDetailsOf = (err: unknown, operation: ProviderOperation): ProviderFailureDetails =>
  isProviderError(err)
    ? err.details
    : // Not a classified provider failure (a bug, a crash mid-call): we cannot prove nothing happened.
      { type: ErrorType.OutcomeUnknown, operation, reason: 'unexpected_error' };

/**
 * Whether repeating after this failure could never help, or could double an effect. A rejection that came after an
 * unknown outcome is final too: the workflow reconciles it (it is not an answer a retry could change).
 */
export const isNonRetryable = (type: ProviderFailureType, safety: OperationSafety, reason?: string): boolean =>
  type === ErrorType.ProviderRejected ||
  (type === ErrorType.OutcomeUnknown && (safety === 'non-idempotent-write' || reason === RejectedAfterUnknown));

/**
 * Turns whatever a provider call threw into the ApplicationFailure Temporal sees (docs/architecture.md#outcome-classes):
 * the type is the class, the cause is kept, `nonRetryable` follows the operation's safety, and a retryable failure
 * carries `nextRetryDelay` (Retry-After wins, else full jitter) or becomes a non-retryable `BudgetExhausted` when the
 * deadline cannot fit another attempt.
 */
export const toActivityFailure = (err: unknown, ctx: ClassifyContext): ApplicationFailure => {
  if (err instanceof ApplicationFailure) return err;
  const details = failureDetailsOf(err, ctx.operation);
  const at = new Date().toISOString();
  const info: ProviderFailureInfo = { ...details, provider: ctx.provider, attempt: ctx.attempt, ...ctx.history, at };
  const cause = err instanceof Error ? err : new Error(String(err));
  const message = `${ctx.provider} ${ctx.operation} (attempt ${ctx.attempt}): ${cause.message}`;

  if (isNonRetryable(details.type, ctx.safety, details.reason)) {
    return ApplicationFailure.create({ type: details.type, message, nonRetryable: true, cause, details: [info] });
  }

  const delay: RetryDelay = computeRetryDelayMs({
    spec: ctx.spec,
    attempt: ctx.attempt,
    random: ctx.random,
    elapsedMs: ctx.elapsedMs,
    ...(details.retryAfterMs === undefined ? {} : { retryAfterMs: details.retryAfterMs }),
  });
  if (delay.exhausted) {
    const last = ApplicationFailure.create({ type: details.type, message, nonRetryable: true, cause, details: [info] });
    const exhausted: BudgetExhaustedInfo = {
      type: ErrorType.BudgetExhausted,
      operation: ctx.operation,
      provider: ctx.provider,
      attempt: ctx.attempt,
      elapsedMs: ctx.elapsedMs,
      reason: delay.reason,
      lastFailureType: details.type,
      at,
      ...(ctx.history === undefined
        ? {}
        : {
            everSent: ctx.history.everSent,
            everUnknown: ctx.history.everUnknown,
            ...(ctx.history.sends === undefined ? {} : { sends: ctx.history.sends }),
          }),
    };
    return ApplicationFailure.create({
      type: ErrorType.BudgetExhausted,
      message: `${ctx.provider} ${ctx.operation}: retry budget exhausted after ${ctx.attempt} attempt(s) (${delay.reason}); last: ${details.type}`,
      nonRetryable: true,
      cause: last,
      details: [exhausted],
    });
  }
  return ApplicationFailure.create({
    type: details.type,
    message,
    nonRetryable: false,
    // Temporal reads 0 as "no override"; 1 ms keeps full jitter's near-zero draws ours.
    nextRetryDelay: Math.max(1, delay.delayMs),
    cause,
    details: [info],
  });
};

/**
 * After an earlier attempt's outcome was unknown, a refusal of this attempt's request says nothing about that one's
 * effect (a 401 after a key rotation, a 400 from a changed validation): it becomes OutcomeUnknown
 * (`rejected_after_unknown`, non-retryable) so the workflow reconciles instead of marking the payment failed. Only an
 * answer about the key itself stands: a key mismatch, or the provider replaying its stored answer for the key.
 */
export function rejectedAfterUnknown(err: unknown, operation: ProviderOperation, carried: AttemptRecord): unknown {
  if (!carried.everUnknown || !isProviderErrorOfType(err, ErrorType.ProviderRejected)) return err;
  if (isAnswerAboutTheKey(err.details)) return err;
  const { status, code } = err.details;
  return new OutcomeUnknownError(
    {
      operation,
      ...(status === undefined ? {} : { status }),
      ...(code === undefined ? {} : { code }),
      reason: RejectedAfterUnknown,
    },
    { cause: err },
  );
}

/** A refusal that answers about the idempotency key itself: a key mismatch, or the key's stored answer replayed. */
const isAnswerAboutTheKey = (details: ProviderFailureDetails): boolean =>
  details.code === 'idempotency_key_mismatch' || details.replayed === true;
