import type { ProviderFailureType } from '../domain/errors';

/** What a provider can do; the retry specs and the activities derive their safety from these flags. */
export interface ProviderCapabilities {
  /** The provider stores the first response per idempotency key and replays it. */
  readonly idempotencyKeys: boolean;
  /** How long the provider remembers a key, in seconds (null: no keys). A resend after this is a new effect. */
  readonly keyTtlSeconds: number | null;
  /** A payment can be found by the idempotency key that created it. */
  readonly lookupByKey: boolean;
  /** Payments can be found by our reference (the order id). */
  readonly lookupByReference: boolean;
}

/** Per-call context: every attempt of one operation sends the same key. */
export interface CallContext {
  readonly idempotencyKey: string;
  /** Temporal activity attempt number (1-based); logged. */
  readonly attempt: number;
  /** Correlation id, logged and sent as `Request-Id`. */
  readonly requestId?: string;
}

export interface CreatePaymentInput {
  /** Integer minor units. */
  readonly amount: number;
  /** ISO 4217, upper case. */
  readonly currency: string;
  /** Our order id; lets a payment be found when its key is not enough. */
  readonly reference: string;
  /** A payment-method token. Never logged. */
  readonly paymentMethod: string;
  readonly capture: 'automatic' | 'manual';
  /**
   * Echoed by the provider in answers and webhooks. We send `merchant_id` and `payment_key` so a webhook finds its
   * payment workflow directly (never customer data).
   */
  readonly metadata?: Readonly<Record<string, string>>;
}

export interface ProviderPayment {
  readonly id: string;
  readonly status: 'authorized' | 'succeeded' | 'voided';
  readonly amount: number;
  readonly amountCaptured: number;
  readonly amountRefunded: number;
  readonly currency: string;
  readonly reference: string;
  /** Unix seconds on the provider's clock. */
  readonly created: number;
  readonly metadata?: Readonly<Record<string, string>>;
}

export interface ProviderRefund {
  readonly id: string;
  readonly paymentId: string;
  readonly amount: number;
  readonly status: 'succeeded';
  readonly created: number;
}

/** A decline is an answer, not an error: the provider says no and nothing happened. */
export type CreatePaymentResult =
  | { readonly outcome: 'succeeded' | 'authorized'; readonly payment: ProviderPayment; readonly replayed: boolean }
  | { readonly outcome: 'declined'; readonly declineCode: string };

export interface ListPaymentsQuery {
  /** Unix seconds, inclusive. */
  readonly createdGte?: number;
  /** Unix seconds, exclusive. */
  readonly createdLt?: number;
  readonly startingAfter?: string;
  readonly limit?: number;
}

/**
 * A payment provider. Every method either returns a value or throws a {@link ProviderError} whose `type` is exactly
 * one class of the outcome classification. Implementations never retry: Temporal's retry policy is the only layer.
 */
export interface PaymentProvider {
  readonly name: string;
  readonly capabilities: ProviderCapabilities;
  createPayment(input: CreatePaymentInput, ctx: CallContext): Promise<CreatePaymentResult>;
  capturePayment(paymentId: string, body: { amount?: number }, ctx: CallContext): Promise<ProviderPayment>;
  voidPayment(paymentId: string, ctx: CallContext): Promise<ProviderPayment>;
  refundPayment(paymentId: string, body: { amount: number }, ctx: CallContext): Promise<ProviderRefund>;
  /** null when the provider answers 404. */
  getPayment(paymentId: string): Promise<ProviderPayment | null>;
  /** The payment created with this idempotency key, or null. */
  findByIdempotencyKey(idempotencyKey: string): Promise<ProviderPayment | null>;
  findByReference(reference: string): Promise<ProviderPayment[]>;
  listPayments(query: ListPaymentsQuery): Promise<{ data: ProviderPayment[]; hasMore: boolean }>;
}

/** Details every provider failure carries, so activities can turn it into an ApplicationFailure without losing it. */
export interface ProviderFailureDetails {
  readonly type: ProviderFailureType;
  readonly operation: string;
  readonly status?: number;
  /** Provider error code (`card_error` code, `idempotency_key_mismatch`, ...). */
  readonly code?: string;
  /** Only for ProviderUnavailable: the delay the provider asked for. */
  readonly retryAfterMs?: number;
  /** Why we classified it so: 'connect_refused', 'connect_timeout', 'dns', 'timeout_after_send', 'reset_after_send', 'unparseable', 'status'. */
  readonly reason: string;
}
