import Stripe from 'stripe';
import { ErrorType } from '../../domain/errors';
import {
  NotSentError,
  OutcomeUnknownError,
  type ProviderError,
  ProviderRejectedError,
  ProviderUnavailableError,
  isProviderError,
} from '../errors';
import { parseRetryAfter } from '../http';

/** What a Stripe call's failure means: a decline (a value: nothing happened), or a {@link ProviderError}. */
export type StripeFailure =
  { readonly kind: 'declined'; readonly code: string } | { readonly kind: 'error'; readonly error: ProviderError };

const retryAfterOf = (
  err: Stripe.errors.StripeError,
  nowMs: number,
  maxMs: number | undefined,
): { retryAfterMs?: number } => {
  const raw = (err.headers as Record<string, string | undefined> | undefined)?.['retry-after'];
  const ms = parseRetryAfter(raw, nowMs, maxMs);
  return ms === undefined ? {} : { retryAfterMs: ms };
};

const rebrand = (e: ProviderError, operation: string): ProviderError => {
  const { type: _type, ...details } = e.details;
  const cause = { cause: e.cause ?? e };
  switch (e.type) {
    case ErrorType.NotSent:
      return new NotSentError({ ...details, operation }, cause);
    case ErrorType.OutcomeUnknown:
      return new OutcomeUnknownError({ ...details, operation }, cause);
    case ErrorType.ProviderUnavailable:
      return new ProviderUnavailableError({ ...details, operation }, cause);
    case ErrorType.ProviderRejected:
      return new ProviderRejectedError({ ...details, operation }, cause);
    default:
      return e;
  }
};

/**
 * Stripe's error types in our outcome classes (docs/architecture.md#outcome-classes):
 * - `StripeConnectionError`: our transport says whether the request had left: NotSent before, OutcomeUnknown after;
 * - `StripeCardError` (402) on a create: a decline, a value; elsewhere ProviderRejected with its code;
 * - `StripeRateLimitError` (429, or 400 `rate_limit`), 409 (`idempotency_key_in_use`, `lock_timeout`), 503:
 *   ProviderUnavailable, with Retry-After (capped at `maxRetryAfterMs`) when Stripe sent one;
 * - `StripeIdempotencyError` (the key was used with other parameters): ProviderRejected `idempotency_key_mismatch`;
 * - `StripeInvalidRequestError`, `StripeAuthenticationError`, `StripePermissionError` (400/401/403/404):
 *   ProviderRejected with Stripe's code;
 * - `StripeAPIError` (500, 502, 504, or a 2xx whose body is not JSON), anything unexpected: OutcomeUnknown.
 */
export function classifyStripeError(
  err: unknown,
  operation: string,
  options: { readonly declines?: boolean; readonly nowMs?: number; readonly maxRetryAfterMs?: number } = {},
): StripeFailure {
  const fail = (error: ProviderError): StripeFailure => ({ kind: 'error', error });
  if (isProviderError(err)) return fail(rebrand(err, operation));
  if (!(err instanceof Stripe.errors.StripeError)) {
    return fail(new OutcomeUnknownError({ operation, reason: 'client_error' }, { cause: err }));
  }
  if (err instanceof Stripe.errors.StripeConnectionError) {
    const detail: unknown = err.detail;
    if (isProviderError(detail)) return fail(rebrand(detail, operation));
    // Not from our transport: we cannot tell whether it left, so it may have had its effect.
    return fail(new OutcomeUnknownError({ operation, reason: 'connection' }, { cause: err }));
  }
  const status = err.statusCode;
  const code = err.code;
  const withCode = code === undefined ? {} : { code };
  const nowMs = options.nowMs ?? Date.now();
  if (err instanceof Stripe.errors.StripeCardError || status === 402) {
    const declineCode = err.decline_code || code || 'card_declined';
    if (options.declines === true) return { kind: 'declined', code: declineCode };
    return fail(
      new ProviderRejectedError({ operation, status: 402, code: declineCode, reason: 'status' }, { cause: err }),
    );
  }
  if (err instanceof Stripe.errors.StripeRateLimitError || status === 409 || status === 429 || status === 503) {
    return fail(
      new ProviderUnavailableError(
        {
          operation,
          ...(status === undefined ? {} : { status }),
          ...withCode,
          ...retryAfterOf(err, nowMs, options.maxRetryAfterMs),
          reason: 'status',
        },
        { cause: err },
      ),
    );
  }
  if (err instanceof Stripe.errors.StripeIdempotencyError) {
    return fail(
      new ProviderRejectedError(
        { operation, status: status ?? 400, code: 'idempotency_key_mismatch', reason: 'status' },
        { cause: err },
      ),
    );
  }
  if (status !== undefined && status >= 400 && status < 500 && status !== 408) {
    return fail(new ProviderRejectedError({ operation, status, ...withCode, reason: 'status' }, { cause: err }));
  }
  // 408, 5xx, or no status at all (a 2xx body that is not JSON): the request may have had its effect.
  return fail(
    new OutcomeUnknownError(
      {
        operation,
        ...(status === undefined ? {} : { status }),
        ...withCode,
        reason: status === undefined ? 'unparseable' : 'status',
      },
      { cause: err },
    ),
  );
}
