/**
 * Reading the failures workflows get back from activities and children: the typed failure's `.type`, the provider's
 * own code, whether the write provably never left the machine, how many requests may have left, and a message an
 * operator can read.
 */
import { ActivityFailure, ApplicationFailure, TimeoutFailure } from '@temporalio/workflow';
import { ErrorType } from '../domain/errors';

/** The ApplicationFailure type under an activity failure, if any. */
export function failureType(err: unknown): string | undefined {
  if (err instanceof ActivityFailure && err.cause instanceof ApplicationFailure) return err.cause.type ?? undefined;
  if (err instanceof ApplicationFailure) return err.type ?? undefined;
  return undefined;
}

/** When a wallet step refused as `HoldSettled` found the hold settled (the settling entry's time), if it said. */
export const settledAtOf = (err: unknown): string | undefined => stringDetail(err, 'settledAt');

/** The provider's own error code (e.g. `amount_too_large`) of a classified provider failure, if it gave one. */
export const providerCodeOf = (err: unknown): string | undefined => stringDetail(err, 'code');

/** A string field of the first detail of the ApplicationFailure (under an activity failure, or itself), if there. */
function stringDetail(err: unknown, field: string): string | undefined {
  const failure = err instanceof ActivityFailure ? err.cause : err;
  if (!(failure instanceof ApplicationFailure)) return undefined;
  const value = (failure.details?.[0] as Record<string, unknown> | undefined)?.[field];
  return typeof value === 'string' ? value : undefined;
}

/**
 * The activity proved no attempt ever sent the write (its final failure says `everSent: false`: breaker open,
 * cool-down, connection refused). Only the activity's own final failure counts: a Temporal timeout could have cut an
 * attempt off after it sent.
 */
export function neverSent(err: unknown): boolean {
  if (!(err instanceof ActivityFailure) || !(err.cause instanceof ApplicationFailure)) return false;
  const info = err.cause.details?.[0] as { everSent?: unknown } | undefined;
  return info?.everSent === false;
}

/**
 * How many requests an activity's failed attempts may have sent to the provider, as its final failure counts them
 * (`sends`); a failure recorded before they were counted: none when it proves nothing left or is a worker's refusal
 * (`ValidationError`), else one. Anything unreadable (Temporal cut the activity off) counts as one: it may have sent.
 */
export function sendsOf(err: unknown): number {
  const failure = err instanceof ActivityFailure ? err.cause : err;
  if (!(failure instanceof ApplicationFailure)) return 1;
  const info = failure.details?.[0] as { sends?: unknown; everSent?: unknown } | undefined;
  if (typeof info?.sends === 'number') return info.sends;
  // A worker's refusal (this worker cannot or will not send for the payment) comes before any call.
  if (failure.type === ErrorType.ValidationError) return 0;
  return info?.everSent === false ? 0 : 1;
}

/**
 * The activity never reached a worker: it timed out waiting to be started, with no attempt's failure under the timeout
 * (an attempt that started and failed would be its cause). Nothing of it was sent. The CI soak on 8b64965: two
 * resubmissions scheduled while the overloaded server could not hand their tasks to the queue timed out so, and counted
 * as one request that may have left, they barred every later resubmission and sent the creates to review.
 */
export function neverStarted(err: unknown): boolean {
  if (!(err instanceof ActivityFailure) || !(err.cause instanceof TimeoutFailure)) return false;
  return err.cause.timeoutType === 'SCHEDULE_TO_START' && err.cause.cause === undefined;
}

/** The failure an activity's last attempt threw, read through an ActivityFailure and a `BudgetExhausted` wrapper. */
export function attemptFailure(err: unknown): unknown {
  const failure = err instanceof ActivityFailure ? err.cause : err;
  if (
    failure instanceof ApplicationFailure &&
    failure.type === ErrorType.BudgetExhausted &&
    failure.cause instanceof ApplicationFailure
  )
    return failure.cause;
  return failure;
}

/**
 * When the activity's failure happened, as it recorded it (`at` of its details; the budget's, else its last attempt's):
 * the same in every replay, and in a query that applied the failure ahead of its task. Undefined for a failure recorded
 * before it carried one, or none of ours (the caller then stamps its own clock, as before).
 */
export function failedAtOf(err: unknown): string | undefined {
  const outer = err instanceof ActivityFailure ? err.cause : err;
  for (const failure of [outer, attemptFailure(err)]) {
    if (!(failure instanceof ApplicationFailure)) continue;
    const at = (failure.details?.[0] as { at?: unknown } | undefined)?.at;
    if (typeof at === 'string') return at;
  }
  return undefined;
}

/**
 * Why a write that never left did not: the last attempt's reason (`breaker_open`, `connection_refused`, ...), else its
 * failure type. Read through a `BudgetExhausted` to the failure it wraps.
 */
export function notSentReason(err: unknown): string {
  const failure = attemptFailure(err);
  if (!(failure instanceof ApplicationFailure)) return 'not_sent';
  const info = failure.details?.[0] as { reason?: unknown } | undefined;
  return typeof info?.reason === 'string' ? info.reason : (failure.type ?? 'not_sent');
}

/** The wait answered for a try that never left when nothing said how long (a refused connection, say). */
export const notSentRetryAfterMs = 5_000;

/** The wait the last attempt was told to keep (a Retry-After, an open breaker's or cool-down's rest), if any. */
export function waitAskedOf(err: unknown): number | undefined {
  const failure = attemptFailure(err);
  if (!(failure instanceof ApplicationFailure)) return undefined;
  const info = failure.details?.[0] as { retryAfterMs?: unknown } | undefined;
  return typeof info?.retryAfterMs === 'number' && info.retryAfterMs > 0 ? info.retryAfterMs : undefined;
}

/**
 * The type of the failure an activity ended with, for a reason an operator reads: the last attempt's (read through
 * `BudgetExhausted`, and through a Temporal timeout to the attempt failure it carries), else `timeout` or `unknown`.
 */
export function lastFailureType(err: unknown): string {
  const failure = attemptFailure(err);
  if (failure instanceof ApplicationFailure) return failure.type ?? 'unknown';
  if (failure instanceof TimeoutFailure)
    return failure.cause instanceof ApplicationFailure ? (failure.cause.type ?? 'timeout') : 'timeout';
  return 'unknown';
}

/** The innermost message, for a review reason an operator can read. */
export function messageOf(err: unknown): string {
  if (err instanceof ActivityFailure && err.cause) return err.cause.message;
  return err instanceof Error ? err.message : String(err);
}
