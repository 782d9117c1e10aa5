/**
 * The provider plug-in interface, and only that: what an adapter (one folder per provider under src/providers/) must
 * do. The shapes it answers in live in src/domain (`ProviderPayment`, `ProviderRefund`, `ProviderCapabilities`,
 * `ProviderEvent`); an adapter's wire format never leaves its folder.
 */
import type { ProviderFailureType } from '../domain/errors';
import type { ProviderCapabilities, ProviderEvent, ProviderPayment, ProviderRefund } from '../domain/provider-payment';

export type { ProviderCapabilities, ProviderEvent, ProviderPayment, ProviderRefund };
// The webhook half of the plug-in interface lives in the domain: the API dispatches to it without importing providers.
export type { WebhookHeaders, WebhookVerdict, WebhookVerifier } from '../domain/webhooks';

/** Correlation and cancellation for any call, reads included. */
export interface LookupContext {
  /** Correlation id, logged and sent as `Request-Id`. */
  readonly requestId?: string;
  /** Temporal activity attempt number (1-based); logged. */
  readonly attempt?: number;
  /**
   * The activity's cancellation: aborting it ends the call now. Before the request left it is NotSent (`cancelled`);
   * after, OutcomeUnknown (`cancelled_after_send`): the provider may act on what it received.
   */
  readonly signal?: AbortSignal;
}

/** Per-call context of a write: every attempt of one operation sends the same key. */
export interface CallContext extends LookupContext {
  readonly idempotencyKey: string;
  readonly attempt: number;
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

/** A decline is an answer, not an error: the provider says no and nothing happened. */
export type CreatePaymentResult =
  | {
      /** `requires_action`: the customer must act (`payment.nextAction`); nothing is authorized yet. */
      readonly outcome: 'succeeded' | 'authorized' | 'requires_action';
      readonly payment: ProviderPayment;
      readonly replayed: boolean;
    }
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
  getPayment(paymentId: string, ctx?: LookupContext): Promise<ProviderPayment | null>;
  /** The payment created with this idempotency key, or null. */
  findByIdempotencyKey(idempotencyKey: string, ctx?: LookupContext): Promise<ProviderPayment | null>;
  /** Every payment with this reference; OutcomeUnknown (`lookup_truncated`) when there are more than it may read. */
  findByReference(reference: string, ctx?: LookupContext): Promise<ProviderPayment[]>;
  /** One page of payments by creation time (provider clock), for the reconcile sweep. */
  listPayments(query: ListPaymentsQuery, ctx?: LookupContext): Promise<{ data: ProviderPayment[]; hasMore: boolean }>;
  /** Releases connections; in-flight calls fail. */
  close?(): Promise<void>;
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
  /**
   * Why we classified it so: 'connect_refused', 'connect_timeout', 'dns', 'cancelled', 'timeout_after_send',
   * 'reset_after_send', 'cancelled_after_send', 'unparseable', 'status', 'lookup_truncated', ...
   */
  readonly reason: string;
  /** The provider replayed the stored answer of an earlier request with this idempotency key (`Idempotent-Replayed`). */
  readonly replayed?: boolean;
}
