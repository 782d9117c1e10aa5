import { ApplicationFailure } from '@temporalio/common';
import { ErrorType, type ProviderFailureType } from '../domain/errors';
import {
  computeRetryDelayMs,
  type OperationSafety,
  type ProviderOperation,
  type RetryDelay,
  type RetrySpec,
} from '../domain/retry';
import { isProviderError } from '../providers/errors';
import type { ProviderFailureDetails } from '../providers/types';

/** `details[0]` of every provider failure an activity throws: the provider's classification plus where it happened. */
export type ProviderFailureInfo = ProviderFailureDetails & {
  readonly provider: string;
  readonly attempt: number;
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
}

export interface ClassifyContext {
  readonly operation: ProviderOperation;
  readonly safety: OperationSafety;
  readonly provider: string;
  readonly attempt: number;
  readonly spec: RetrySpec;
  readonly elapsedMs: number;
  readonly random: () => number;
}

/** Failure details of any thrown value: a ProviderError's own, or OutcomeUnknown for anything unexpected. */
export const failureDetailsOf = (err: unknown, operation: ProviderOperation): ProviderFailureDetails =>
  isProviderError(err)
    ? err.details
    : // Not a classified provider failure (a bug, a crash mid-call): we cannot prove nothing happened.
      { type: ErrorType.OutcomeUnknown, operation, reason: 'unexpected_error' };

/** Whether repeating after this failure could never help, or could double an effect. */
export const isNonRetryable = (type: ProviderFailureType, safety: OperationSafety): boolean =>
  type === ErrorType.ProviderRejected || (type === ErrorType.OutcomeUnknown && safety === 'non-idempotent-write');

/**
 * Turns whatever a provider call threw into the ApplicationFailure Temporal sees (DESIGN.md "Outcome classification"):
 * the type is the class, the cause is kept, `nonRetryable` follows the operation's safety, and a retryable failure
 * carries `nextRetryDelay` (Retry-After wins, else full jitter) or becomes a non-retryable `BudgetExhausted` when the
 * deadline cannot fit another attempt.
 */
export const toActivityFailure = (err: unknown, ctx: ClassifyContext): ApplicationFailure => {
  if (err instanceof ApplicationFailure) return err;
  const details = failureDetailsOf(err, ctx.operation);
  const info: ProviderFailureInfo = { ...details, provider: ctx.provider, attempt: ctx.attempt };
  const cause = err instanceof Error ? err : new Error(String(err));
  const message = `${ctx.provider} ${ctx.operation} (attempt ${ctx.attempt}): ${cause.message}`;

  if (isNonRetryable(details.type, ctx.safety)) {
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
