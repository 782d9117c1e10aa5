/**
 * The failures a {@link PaymentsClient} caller can act on, one class each, with type guards. Anything else (Temporal
 * unavailable, a bug) is thrown as it came, so it is never mistaken for one of these.
 */
import type { FieldError } from '../domain/api-schemas';

/** Base of the typed client errors; `code` is stable, `message` is for humans. */
export abstract class PaymentsClientError extends Error {
  abstract readonly code: string;
}

/** The request does not parse: one entry per invalid field. Nothing was started. */
export class ValidationError extends PaymentsClientError {
  readonly code = 'validation_error';
  constructor(
    readonly fields: readonly FieldError[],
    options?: ErrorOptions,
  ) {
    super(`Invalid request: ${fields.map((f) => `${f.path}: ${f.message}`).join('; ')}`, options);
    this.name = 'ValidationError';
  }
}

/** The idempotency key was used before for a request with other significant fields. Nothing happened. */
export class IdempotencyKeyReused extends PaymentsClientError {
  readonly code = 'idempotency_key_reused';
  constructor(message = 'This idempotency key was used for a different request', options?: ErrorOptions) {
    super(message, options);
    this.name = 'IdempotencyKeyReused';
  }
}

/** No payment with this key for this merchant (another merchant's key looks exactly the same). */
export class PaymentNotFound extends PaymentsClientError {
  readonly code = 'not_found';
  constructor(options?: ErrorOptions) {
    super('No such payment', options);
    this.name = 'PaymentNotFound';
  }
}

/** The payment's current status does not allow the operation (capture of a declined payment, resolve outside review). */
export class InvalidTransition extends PaymentsClientError {
  readonly code = 'invalid_transition';
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'InvalidTransition';
  }
}

/** The amount exceeds what can be captured or refunded. */
export class AmountExceeded extends PaymentsClientError {
  readonly code = 'amount_exceeded';
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'AmountExceeded';
  }
}

/**
 * The provider refused the capture or refund (a 4xx of its own): nothing moved. A repeat of the same key answers the
 * same refusal. `providerCode` is the provider's own code, when it gave one.
 */
export class ProviderRejected extends PaymentsClientError {
  readonly code = 'provider_rejected';
  /** This refusal answers a repeat of the operation's key (its first final answer, replayed). */
  readonly replayed: boolean;
  constructor(
    message: string,
    readonly providerCode?: string,
    options?: ErrorOptions & { readonly replayed?: boolean },
  ) {
    super(message, options);
    this.name = 'ProviderRejected';
    this.replayed = options?.replayed === true;
  }
}

/** Another capture or refund of this payment has an unknown outcome being reconciled: repeat once it settled. */
export class OperationInFlight extends PaymentsClientError {
  readonly code = 'operation_in_flight';
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'OperationInFlight';
  }
}

/**
 * The capture or refund never reached the provider (its breaker was open, it asked everyone to wait, its connection was
 * refused): nothing moved and nothing is held. Repeat the same request after `retryAfterMs`; its key tries again.
 */
export class ProviderUnavailable extends PaymentsClientError {
  readonly code = 'provider_unavailable';
  constructor(
    message: string,
    readonly retryAfterMs: number,
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.name = 'ProviderUnavailable';
  }
}

/** True for a {@link ProviderUnavailable}. */
export const isProviderUnavailable = (e: unknown): e is ProviderUnavailable => e instanceof ProviderUnavailable;

/** True for a {@link ProviderRejected}. */
export const isProviderRejected = (e: unknown): e is ProviderRejected => e instanceof ProviderRejected;
/** True for an {@link OperationInFlight}. */
export const isOperationInFlight = (e: unknown): e is OperationInFlight => e instanceof OperationInFlight;

/** True for a {@link ValidationError}. */
export const isValidationError = (e: unknown): e is ValidationError => e instanceof ValidationError;
/** True for an {@link IdempotencyKeyReused}. */
export const isIdempotencyKeyReused = (e: unknown): e is IdempotencyKeyReused => e instanceof IdempotencyKeyReused;
/** True for a {@link PaymentNotFound}. */
export const isPaymentNotFound = (e: unknown): e is PaymentNotFound => e instanceof PaymentNotFound;
/** True for an {@link InvalidTransition}. */
export const isInvalidTransition = (e: unknown): e is InvalidTransition => e instanceof InvalidTransition;
/** True for an {@link AmountExceeded}. */
export const isAmountExceeded = (e: unknown): e is AmountExceeded => e instanceof AmountExceeded;
/** True for any typed client error. */
export const isPaymentsClientError = (e: unknown): e is PaymentsClientError => e instanceof PaymentsClientError;

/** No review item with this id for this merchant (another merchant's item, or one without a merchant, looks the same). */
export class ReviewItemNotFound extends PaymentsClientError {
  readonly code = 'not_found';
  constructor(options?: ErrorOptions) {
    super('No such review item', options);
    this.name = 'ReviewItemNotFound';
  }
}

/** True for a {@link ReviewItemNotFound}. */
export const isReviewItemNotFound = (e: unknown): e is ReviewItemNotFound => e instanceof ReviewItemNotFound;

/**
 * Another payment for the same order is still open (pending, unknown, or in review with its charge undecided): a new
 * key for that order is refused so the customer is not charged twice. `paymentKey` names the open payment. Nothing
 * was started.
 */
export class PaymentInFlight extends PaymentsClientError {
  readonly code = 'payment_in_flight';
  constructor(
    readonly paymentKey: string,
    options?: ErrorOptions,
  ) {
    super('A payment for this order is still open under another key', options);
    this.name = 'PaymentInFlight';
  }
}

/** True for a {@link PaymentInFlight}. */
export const isPaymentInFlight = (e: unknown): e is PaymentInFlight => e instanceof PaymentInFlight;

/** A provider payment as a look-up found it, in a {@link ProviderDisagrees}. */
export interface ProviderPaymentShown {
  readonly id: string;
  readonly status: string;
  readonly amount: number;
  readonly currency: string;
  readonly amountCaptured: number;
  readonly amountRefunded: number;
}

/**
 * An operator's verdict that a look-up at the provider does not confirm: `succeeded` for something the provider does
 * not show, or `failed` for something it shows. `providerPayment` is what the look-up found (absent: nothing). The
 * verdict was not recorded (where the provider showed the operation, the payment took the provider's answer).
 */
export class ProviderDisagrees extends PaymentsClientError {
  readonly code = 'provider_disagrees';
  constructor(
    message: string,
    readonly providerPayment?: ProviderPaymentShown,
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.name = 'ProviderDisagrees';
  }
}

/** True for a {@link ProviderDisagrees}. */
export const isProviderDisagrees = (e: unknown): e is ProviderDisagrees => e instanceof ProviderDisagrees;
