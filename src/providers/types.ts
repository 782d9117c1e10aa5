/**
 * The provider plug-in interface, and only that: what an adapter (one folder per provider under src/providers/) must
 * do. The shapes it answers in live in src/domain (`ProviderPayment`, `ProviderRefund`, `ProviderCapabilities`,
 * `ProviderEvent`); an adapter's wire format never leaves its folder.
 */
import type { ProviderFailureType } from '../domain/errors';
import type { ProviderCapabilities, ProviderEvent, ProviderPayment, ProviderRefund } from '../domain/provider-payment';

export type { ProviderCapabilities, ProviderEvent, ProviderPayment, ProviderRefund };

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

/** The request headers a webhook arrived with (lower-case names, as Node gives them). */
export type WebhookHeaders = Readonly<Record<string, string | string[] | undefined>>;

/** What a provider's webhook verifier made of one delivery. */
export type WebhookVerdict =
  /** Signed by the provider and parsed: signal it. */
  | { readonly kind: 'event'; readonly event: ProviderEvent; readonly eventType: string }
  /** Signed, but of a type the payments do not act on (answered 2xx so the provider stops resending it). */
  | { readonly kind: 'ignored'; readonly eventType: string }
  /** Not verifiably from the provider (missing, malformed, stale or wrong signature): never applied. */
  | { readonly kind: 'refused'; readonly reason: string }
  /** Signed, but not an event we can read. */
  | {
      readonly kind: 'invalid';
      readonly message: string;
      readonly issues: readonly { readonly path: string; readonly message: string }[];
    };

/**
 * The webhook half of a provider plug-in: verifies a delivery on its raw body (before any parsing) with the provider's
 * own scheme and secret, and parses it into the domain's {@link ProviderEvent}. Pure apart from the clock: the API
 * holds one per provider and dispatches `POST /webhooks/:provider` to it.
 */
export interface WebhookVerifier {
  readonly provider: string;
  /** The header that carries the signature (for the API's documentation and logs). */
  readonly signatureHeader: string;
  verify(rawBody: string, headers: WebhookHeaders, nowS?: number): WebhookVerdict;
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
