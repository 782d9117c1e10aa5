import { ErrorType, type ProviderFailureType } from '../domain/errors';
import type { ProviderFailureDetails } from './types';

// A registry-wide brand, so the guard still holds when two copies of this module are loaded (jest module registries,
// a bundled and an unbundled copy), where `instanceof` would say no.
const brand: unique symbol = Symbol.for('payment-workflows.ProviderError');

const describe = (d: ProviderFailureDetails): string =>
  [
    `${d.type} on ${d.operation}: ${d.reason}`,
    d.status === undefined ? undefined : `HTTP ${d.status}`,
    d.code === undefined ? undefined : `code ${d.code}`,
    d.retryAfterMs === undefined ? undefined : `retry after ${d.retryAfterMs} ms`,
  ]
    .filter((part) => part !== undefined)
    .join(', ');

/**
 * The one error a provider call throws. `type` is exactly one outcome class (docs/architecture.md#outcome-classes); activities
 * branch on it (never on the message) and keep the error as the `cause` of their ApplicationFailure.
 */
export class ProviderError extends Error {
  readonly [brand] = true;
  readonly details: ProviderFailureDetails;

  constructor(details: ProviderFailureDetails, options?: { cause?: unknown }) {
    super(describe(details), options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.details = details;
  }

  get type(): ProviderFailureType {
    return this.details.type;
  }
}

type Details<T extends ProviderFailureType> = Omit<ProviderFailureDetails, 'type'> & { readonly type?: T };

/** 4xx except 408/409/429: the provider refused and nothing happened. Never retried. */
export class ProviderRejectedError extends ProviderError {
  constructor(details: Details<typeof ErrorType.ProviderRejected>, options?: { cause?: unknown }) {
    super({ ...details, type: ErrorType.ProviderRejected }, options);
  }
}

/** The request provably never left (refused, DNS, connect timeout). Always safe to retry. */
export class NotSentError extends ProviderError {
  constructor(details: Details<typeof ErrorType.NotSent>, options?: { cause?: unknown }) {
    super({ ...details, type: ErrorType.NotSent }, options);
  }
}

/** A kind of NotSent: the breaker is open, so no request was attempted. */
export class CircuitOpenError extends ProviderError {
  constructor(details: Details<typeof ErrorType.CircuitOpen>, options?: { cause?: unknown }) {
    super({ ...details, type: ErrorType.CircuitOpen }, options);
  }
}

/** 429, 503, 409 concurrent use: the provider is there but will not do it now; `retryAfterMs` when it said so. */
export class ProviderUnavailableError extends ProviderError {
  constructor(details: Details<typeof ErrorType.ProviderUnavailable>, options?: { cause?: unknown }) {
    super({ ...details, type: ErrorType.ProviderUnavailable }, options);
  }
}

/** The request may have had its effect: timeout or reset after send, 500/502/504, unparseable 2xx. */
export class OutcomeUnknownError extends ProviderError {
  constructor(details: Details<typeof ErrorType.OutcomeUnknown>, options?: { cause?: unknown }) {
    super({ ...details, type: ErrorType.OutcomeUnknown }, options);
  }
}

/** True for every {@link ProviderError}, also one from another copy of this module. */
export const isProviderError = (e: unknown): e is ProviderError =>
  e instanceof ProviderError ||
  (e instanceof Error && (e as unknown as Record<symbol, unknown>)[brand] === true && 'details' in e);

/** True for a {@link ProviderError} of exactly this class. */
export const isProviderErrorOfType = <T extends ProviderFailureType>(
  e: unknown,
  type: T,
): e is ProviderError & { readonly type: T; readonly details: ProviderFailureDetails & { readonly type: T } } =>
  isProviderError(e) && e.type === type;
