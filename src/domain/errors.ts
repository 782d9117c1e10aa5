/**
 * Failure types shared by providers, activities, workflows and the client. Code branches on these constants,
 * never on an error message.
 */
export const ErrorType = {
  /** The provider answered 4xx (not 408/409/429): it refused the request and nothing happened. Never retried. */
  ProviderRejected: 'ProviderRejected',
  /** The request provably never left (connection refused, DNS, connect timeout). Always safe to retry. */
  NotSent: 'NotSent',
  /** A kind of NotSent: the circuit breaker is open, so we did not even try. */
  CircuitOpen: 'CircuitOpen',
  /** 429, 503, 409 concurrent use: the provider is there but will not do it now. Retry after Retry-After. */
  ProviderUnavailable: 'ProviderUnavailable',
  /** The request may have had its effect (timeout/reset after send, 500/502/504, unparseable 2xx). */
  OutcomeUnknown: 'OutcomeUnknown',
  /** A payment-state transition that the current state does not allow (capture of a declined payment, ...). */
  InvalidTransition: 'InvalidTransition',
  /** A capture or refund of the payment has an unknown outcome under reconcile; a new one waits until it settled. */
  OperationInFlight: 'OperationInFlight',
  /** Same idempotency key, different request fingerprint. */
  IdempotencyKeyReused: 'IdempotencyKeyReused',
  /** A capture or refund over what the payment allows (authorized not yet captured, captured not yet refunded). */
  AmountExceeded: 'AmountExceeded',
  /** Input that fails its schema. */
  ValidationError: 'ValidationError',
  /** An operator's verdict that a look-up at the provider does not confirm (the details say what the provider shows). */
  ProviderDisagrees: 'ProviderDisagrees',
  /** The retry budget (deadline) of an operation ran out. */
  BudgetExhausted: 'BudgetExhausted',
} as const;

export type ErrorType = (typeof ErrorType)[keyof typeof ErrorType];

/** The provider-call failure classes (docs/architecture.md#outcome-classes). */
export const ProviderFailureTypes = [
  ErrorType.ProviderRejected,
  ErrorType.NotSent,
  ErrorType.CircuitOpen,
  ErrorType.ProviderUnavailable,
  ErrorType.OutcomeUnknown,
] as const;
export type ProviderFailureType = (typeof ProviderFailureTypes)[number];
