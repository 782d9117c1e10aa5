/** Turns Temporal failures and zod errors into the typed client errors, keeping the original as `cause`. */
import {
  ServiceError,
  WorkflowExecutionAlreadyStartedError,
  WorkflowNotFoundError,
  WorkflowUpdateFailedError,
  WorkflowUpdateRPCTimeoutOrCancelledError,
  isGrpcServiceError,
} from '@temporalio/client';
import { ApplicationFailure, NamespaceNotFoundError } from '@temporalio/common';
import type { z } from 'zod';
import type { FieldError } from '../domain/api-schemas';
import { ErrorType } from '../domain/errors';
import {
  AmountExceeded,
  IdempotencyKeyReused,
  InvalidTransition,
  OperationInFlight,
  ProviderUnavailable,
  ValidationError,
} from './errors';

/** The failure type the capture/refund validators use for an amount over the limit. */
export const AmountExceededType = ErrorType.AmountExceeded;

/** A zod issue path as the API shows it: `amount.value`, `items.0.id`; the root is `(body)`. */
export const dottedPath = (path: readonly PropertyKey[], prefix?: string): string => {
  const parts = [...(prefix === undefined ? [] : [prefix]), ...path.map(String)];
  return parts.length === 0 ? '(body)' : parts.join('.');
};

/** The field errors of a zod error; an unknown member is named by its own path, so the caller sees what to remove. */
export const fieldErrors = (error: z.ZodError, prefix?: string): FieldError[] =>
  error.issues.flatMap((issue) =>
    issue.code === 'unrecognized_keys'
      ? issue.keys.map((k) => ({ path: dottedPath([...issue.path, k], prefix), message: issue.message }))
      : [{ path: dottedPath(issue.path, prefix), message: issue.message }],
  );

/** Parses `value` or throws a {@link ValidationError} naming every invalid field. */
export function parseOrThrow<S extends z.ZodType>(schema: S, value: unknown, prefix?: string): z.output<S> {
  const result = schema.safeParse(value);
  if (!result.success) throw new ValidationError(fieldErrors(result.error, prefix), { cause: result.error });
  return result.data;
}

/** The ApplicationFailure an update validator or handler threw, if that is what `err` carries. */
export const updateFailureOf = (err: unknown): ApplicationFailure | undefined =>
  err instanceof WorkflowUpdateFailedError && err.cause instanceof ApplicationFailure ? err.cause : undefined;

/** The payment's run closed before (or while) the update or signal reached it. */
export function closedBeforeUpdate(err: unknown): boolean {
  return (
    err instanceof WorkflowExecutionAlreadyStartedError ||
    err instanceof WorkflowNotFoundError ||
    updateFailureOf(err)?.type === 'AcceptedUpdateCompletedWorkflow'
  );
}

/** The typed error for a rejected update; anything else comes back unchanged. */
export function translateUpdateFailure(err: unknown): unknown {
  const failure = updateFailureOf(err);
  return failure === undefined ? err : (translateRefusal(failure, err) ?? err);
}

/**
 * The typed error for a refusal by the payment's rules (a validator's failure, from an update or a query's answer);
 * undefined for a type the client has no error for.
 */
export function translateRefusal(
  refusal: { readonly type?: string | null; readonly message: string; readonly details?: unknown[] | null },
  cause?: unknown,
): Error | undefined {
  const options = { cause: cause ?? refusal };
  switch (refusal.type) {
    case ErrorType.IdempotencyKeyReused:
      return new IdempotencyKeyReused(refusal.message, options);
    case ErrorType.InvalidTransition:
      return new InvalidTransition(refusal.message, options);
    case AmountExceededType:
      return new AmountExceeded(refusal.message, options);
    case ErrorType.OperationInFlight:
      return new OperationInFlight(refusal.message, options);
    case ErrorType.ProviderUnavailable: {
      // A capture or refund that never reached the provider: the workflow says how long to wait.
      const wait = (refusal.details?.[0] as { retryAfterMs?: unknown } | undefined)?.retryAfterMs;
      return new ProviderUnavailable(refusal.message, typeof wait === 'number' ? wait : 1_000, options);
    }
    case ErrorType.ValidationError: {
      // A handler names the field it refused in its details (e.g. an operator's providerPaymentId).
      const field = (refusal.details?.[0] as { field?: unknown } | undefined)?.field;
      const path = typeof field === 'string' ? field : '(body)';
      return new ValidationError([{ path, message: refusal.message }], options);
    }
    default:
      return undefined;
  }
}

/**
 * gRPC codes of a Temporal that is down, restarting or overloaded: CANCELLED (we never cancel a call ourselves; a
 * server shutting down ends its calls with it, seen in the soak's Temporal restart), DEADLINE_EXCEEDED,
 * RESOURCE_EXHAUSTED, UNAVAILABLE.
 */
const unavailableCodes: ReadonlySet<number> = new Set([1, 4, 8, 14]);

/**
 * Temporal could not be reached or did not answer in time: nothing is known to have failed, the caller may repeat.
 * Raw gRPC errors count too: the workflow service's own calls (a visibility list, a describe) are not wrapped in a
 * ServiceError.
 */
export const isTemporalUnavailable = (err: unknown): boolean =>
  err instanceof ServiceError ||
  err instanceof WorkflowUpdateRPCTimeoutOrCancelledError ||
  err instanceof NamespaceNotFoundError ||
  (isGrpcServiceError(err) && (unavailableCodes.has(err.code) || namespaceMissing(err)));

/**
 * NOT_FOUND for the namespace itself: a server restarting, or whose database restarts, answers so until its namespace
 * registry is loaded again (the production-schedule soak's Temporal restart: one charge answered 500 by it). Nothing
 * was started; a namespace that is really missing is an outage of this service too.
 */
const namespaceMissing = (err: { readonly code: number; readonly details?: string; readonly message: string }) =>
  err.code === 5 && /^Namespace \S+ is not found/.test(err.details ?? err.message);
