/**
 * Schemas of the payments HTTP API (docs/http-api.md) beyond the request/response bodies in `payment.ts`: headers,
 * paths, query strings, error bodies and list pages. They drive both validation and the generated OpenAPI document.
 */
import { z } from 'zod';
import { IdempotencyKey, OrderId, PaymentStatus, PaymentView, ProviderName, idempotencyKeyRules } from './payment';
import { ProviderPayment } from './provider-payment';
import { ResolveReviewItemRequest } from './review-items';

/** The `Idempotency-Key` header every write carries (header names arrive lower-cased). Other headers pass through. */
export const IdempotencyKeyHeaders = z.looseObject({
  // The rules themselves, not a pipe into them: the document then carries the key's length and pattern.
  'idempotency-key': idempotencyKeyRules(
    z.string({ error: 'the Idempotency-Key header is required (1-255 printable characters)' }),
  ).describe('The caller’s key for this intent: 1–255 printable ASCII characters, no leading or trailing space.'),
});

/** `/v1/payments/:key`: the payment's idempotency key, URL-encoded. */
export const PaymentKeyParams = z.object({ key: IdempotencyKey.describe('The payment’s idempotency key.') });

/** `/webhooks/:provider`. */
export const ProviderParams = z.object({ provider: ProviderName.describe('The provider that sends the event.') });

/** An opaque page token: base64url of the visibility store's token. */
export const PageToken = z
  .string()
  .max(4096, { message: 'pageToken is too long' })
  .regex(/^[A-Za-z0-9_-]+$/, { message: 'pageToken must be a token from an earlier page' });

/** `GET /v1/payments` query string. */
export const ListPaymentsQuery = z.strictObject({
  status: PaymentStatus.optional(),
  orderId: OrderId.optional(),
  pageToken: PageToken.optional(),
  pageSize: z.coerce.number().int().min(1).max(100).optional(),
});
export type ListPaymentsQuery = z.infer<typeof ListPaymentsQuery>;

/** `GET /v1/payments` answer. */
export const PaymentList = z.object({
  payments: z.array(PaymentView),
  nextPageToken: PageToken.optional(),
});
export type PaymentList = z.infer<typeof PaymentList>;

/** Error types the API answers with; clients branch on `type`, never on `message`. */
export const ApiErrorType = z.enum([
  'unauthorized',
  'validation_error',
  'idempotency_key_reused',
  'not_found',
  'invalid_transition',
  'amount_exceeded',
  /** The provider refused the capture/refund/void (a 4xx of its own): nothing moved. `providerCode` says why. */
  'provider_rejected',
  /** A capture/refund of this payment has an unknown outcome being reconciled: try again once it settled. */
  'operation_in_flight',
  /** A payment for this order is still pending or unknown under another key (`paymentKey` names it). */
  'payment_in_flight',
  /**
   * The capture/refund never reached the provider (breaker open, a cool-down, a refused connection): nothing moved and
   * nothing is held; repeat the same request after `Retry-After`.
   */
  'provider_unavailable',
  /**
   * An operator's verdict a look-up at the provider does not confirm (`succeeded` for what it does not show, `failed`
   * for what it shows); `providerPayment` is what it found. The verdict was not recorded.
   */
  'provider_disagrees',
  /** The token is valid but its role may not do this (a merchant token on an operator action). */
  'forbidden',
  'invalid_signature',
  /** A wallet credit in another currency than the wallet's (fixed by its first credit). */
  'currency_mismatch',
  'payload_too_large',
  'unsupported_media_type',
  'unavailable',
  'internal_error',
]);
export type ApiErrorType = z.infer<typeof ApiErrorType>;

/** One invalid field: a dotted path into the body (or the header / query parameter name) and why. */
export const FieldError = z.object({ path: z.string(), message: z.string() });
export type FieldError = z.infer<typeof FieldError>;

/** Every error answer: `{ error: { type, message?, fields? } }`. Never a stack trace. */
export const ApiError = z.object({
  error: z.object({
    type: ApiErrorType,
    message: z.string().optional(),
    fields: z.array(FieldError).optional(),
    /** With `provider_rejected`: the provider's own error code, when it gave one. */
    providerCode: z.string().optional(),
    /** With `payment_in_flight`: the key of the open payment for the same order. */
    paymentKey: z.string().optional(),
    /** With `provider_disagrees`: the provider payment the look-up found (absent: it found none). */
    providerPayment: z
      .object({
        id: z.string(),
        status: z.string(),
        amount: z.number().int(),
        currency: z.string(),
        amountCaptured: z.number().int(),
        amountRefunded: z.number().int(),
      })
      .optional(),
  }),
});
export type ApiError = z.infer<typeof ApiError>;

/** `POST /webhooks/:provider` answer, once Temporal durably accepted the event. */
export const WebhookAck = z.object({
  received: z.literal(true),
  /**
   * `payment`: signalled to the payment's workflow; `parked`: kept for an operator; `duplicate`: already applied;
   * `ignored`: signed by the provider, of a type no payment acts on.
   */
  delivery: z.enum(['payment', 'parked', 'duplicate', 'ignored']),
});
export type WebhookAck = z.infer<typeof WebhookAck>;

/** `GET /healthz` answer. */
export const Health = z.object({ status: z.literal('ok') });

// --- Review items (`/v1/review-items`): provider payments the reconcile sweep flagged for a decision. ---

const Iso = z.iso.datetime({ offset: true });
const NonNegative = z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER);

/** A review item's id, `review:<provider>:<providerPaymentId>`; in a path its colons may be sent as is or as `%3A`. */
export const ReviewItemId = z
  .string()
  .max(300, { message: 'id is too long' })
  .regex(/^review:[a-z][a-z0-9_-]{0,31}:[\x21-\x7E]{1,255}$/, {
    message: 'id must be a review item id: review:<provider>:<providerPaymentId>',
  });

/** `/v1/review-items/:id`. */
export const ReviewItemParams = z.object({
  id: ReviewItemId.describe('The review item id, `review:<provider>:<providerPaymentId>`.'),
});

/** `GET /v1/review-items` query string. */
export const ListReviewItemsQuery = z.strictObject({
  open: z
    .enum(['true', 'false'], { error: 'open must be true or false' })
    .optional()
    .describe('`true` (default): only items awaiting a decision; `false`: every item (open, resolved, closed).'),
  pageToken: PageToken.optional(),
  pageSize: z.coerce.number().int().min(1).max(100).optional(),
});
export type ListReviewItemsQuery = z.infer<typeof ListReviewItemsQuery>;

/** `POST /v1/review-items/:id/resolve` body: what was done about it (the operator is the caller's merchant). */
export const ResolveReviewItemBody = ResolveReviewItemRequest.omit({ operator: true });
export type ResolveReviewItemBody = z.infer<typeof ResolveReviewItemBody>;

/** Why a review item was raised. */
export const ReviewItemKind = z
  .enum(['orphan', 'disagreement'])
  .describe(
    '`orphan`: a provider payment no payment of ours accounts for; `disagreement`: our payment says otherwise ' +
      '(status or amount).',
  );

/**
 * `open`: awaiting a decision; `resolved`: decided (`resolution` says how); `closed`: ended without a decision
 * (terminated by an operator).
 */
export const ReviewItemStatus = z.enum(['open', 'resolved', 'closed']);
export type ReviewItemStatus = z.infer<typeof ReviewItemStatus>;

/** A review item as the API shows it. Amounts are minor units, as the provider reported them when flagged. */
export const ReviewItemView = z.object({
  id: z.string(),
  merchantId: z.string(),
  provider: z.string(),
  providerPaymentId: z.string(),
  kind: ReviewItemKind,
  /** Orphans only. */
  orphanReason: z
    .enum(['unmatched', 'second_charge', 'ambiguous'])
    .optional()
    .describe(
      'Orphans only. `unmatched`: no payment of ours has its metadata or reference; `second_charge`: our payment ' +
        'records another provider payment or is held at another provider; `ambiguous`: several payments of ours ' +
        'could own it.',
    ),
  detail: z.string().describe('One line on what was found.'),
  reference: z.string().describe('The provider payment’s reference: our order id when the payment is ours.'),
  amount: z.object({ value: NonNegative, currency: z.string() }),
  providerStatus: ProviderPayment.shape.status.describe('The provider payment’s status when flagged.'),
  providerCreatedAt: Iso,
  paymentKey: z
    .string()
    .optional()
    .describe(
      'The key of our payment this provider payment names: the matched payment’s, else the `payment_key` of its ' +
        'metadata (which may name a payment that was never started).',
    ),
  payment: z
    .object({
      key: z.string(),
      status: PaymentStatus,
      amount: z.object({ value: NonNegative, currency: z.string() }),
    })
    .optional()
    .describe('Our payment it was compared with (disagreements, second charges), as it was when flagged.'),
  status: ReviewItemStatus,
  resolution: z
    .object({
      action: ResolveReviewItemRequest.shape.action,
      note: z.string(),
      operator: z.string().optional(),
      resolvedAt: Iso,
    })
    .optional(),
  /** When the sweep flagged it. */
  createdAt: Iso,
});
export type ReviewItemView = z.infer<typeof ReviewItemView>;

/** `GET /v1/review-items` answer. */
export const ReviewItemList = z.object({
  items: z.array(ReviewItemView),
  nextPageToken: PageToken.optional(),
});
export type ReviewItemList = z.infer<typeof ReviewItemList>;
