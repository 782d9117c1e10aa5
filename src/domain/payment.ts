import { z } from 'zod';
import { Money, MinorUnits } from './money';
import { WalletId } from './wallets';

/** Every status a payment can show (docs/http-api.md#statuses). `succeeded` = captured in full or in part. */
export const PaymentStatus = z.enum([
  'pending',
  'authorized',
  'succeeded',
  'declined',
  'failed',
  'unknown',
  'needs_review',
  'voided',
  'requires_action',
]);
export type PaymentStatus = z.infer<typeof PaymentStatus>;

/** Statuses that never change again (refunds of a succeeded payment show in `amountRefunded`, not in the status). */
export const terminalStatuses = [
  'succeeded',
  'declined',
  'failed',
  'voided',
] as const satisfies readonly PaymentStatus[];
/**
 * Statuses where the provider has answered: the API says 200; anything else (pending, unknown, needs_review,
 * requires_action: the customer must act) is 202.
 */
export const settledStatuses = ['authorized', ...terminalStatuses] as const satisfies readonly PaymentStatus[];

const terminalSet: ReadonlySet<PaymentStatus> = new Set(terminalStatuses);
const settledSet: ReadonlySet<PaymentStatus> = new Set(settledStatuses);

/** True for a status that never changes again. */
export const isTerminalStatus = (status: PaymentStatus): boolean => terminalSet.has(status);
/** True once the provider answered (authorized or terminal); false while pending, unknown or in review. */
export const isSettledStatus = (status: PaymentStatus): boolean => settledSet.has(status);

/** Printable ASCII, no control characters. */
const printableAscii = /^[\x20-\x7E]+$/;
/**
 * A card number (PAN) written the way people write one: 4-4-4-4(-3) or Amex 4-6-5 groups with one kind of separator.
 * Contiguous digit runs are not flagged in free fields: real order ids (Shopify's are 13+ digits) look just like them.
 * The groups must stand alone (no letter or digit glued to either end): inside a UUID, all-digit groups such as
 * `abcd1234-7890-4123-9456-…` are hex, not a card, and about one UUID in a thousand has them.
 */
const groupedPan = /(?:^|[^0-9A-Za-z])\d{4}([ -])(?:\d{4}\1\d{4}\1\d{4}(?:\1\d{3})?|\d{6}\1\d{5})(?![0-9A-Za-z])/;
/** A bare run of 12–19 digits: a card number where a token belongs. */
const barePan = /^\d{12,19}$/;

/** A merchant id: it is part of workflow ids (`charge:<merchantId>:<key>`), so it never contains a colon. */
export const MerchantId = z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, {
  message: 'merchantId must be 1-64 characters of A-Z, a-z, 0-9, _ or -',
});
export type MerchantId = z.infer<typeof MerchantId>;

/** A provider name as configured on the worker (`simulator`, `stripe`); it names a task queue. */
export const ProviderName = z.string().regex(/^[a-z][a-z0-9_-]{0,31}$/, {
  message: 'provider must be 1-32 characters of a-z, 0-9, _ or -, starting with a letter',
});

/** The rules of an idempotency key on a string schema (so a header can say it is missing in its own words). */
export const idempotencyKeyRules = (s: z.ZodString) =>
  s
    .min(1, { message: 'idempotency key must not be empty' })
    .max(255, { message: 'idempotency key must be at most 255 characters' })
    .regex(/^[\x21-\x7E](?:[\x20-\x7E]*[\x21-\x7E])?$/, {
      message: 'idempotency key must be printable ASCII without leading or trailing spaces',
    });

/** The order service's idempotency key: 1–255 printable ASCII characters, no leading or trailing space. */
export const IdempotencyKey = idempotencyKeyRules(z.string());
export type IdempotencyKey = z.infer<typeof IdempotencyKey>;

/** The order id, sent to the provider as `reference` and stored as a search attribute: never card data. */
export const OrderId = z
  .string()
  .trim()
  .min(1, { message: 'orderId must not be empty' })
  .max(128, { message: 'orderId must be at most 128 characters' })
  .regex(printableAscii, { message: 'orderId must be printable ASCII' })
  .refine((v) => !groupedPan.test(v), { message: 'orderId looks like a card number (PAN); never put card data in it' })
  // A search attribute: visibility queries cannot match a backslash or a double quote.
  .refine((v) => !/[\\"]/.test(v), { message: 'orderId must not contain \\ or "' });

/** A payment-method token issued by the provider (never a card number). */
export const PaymentMethodToken = z
  .string()
  .min(1, { message: 'paymentMethod must not be empty' })
  .max(255, { message: 'paymentMethod must be at most 255 characters' })
  .regex(/^[A-Za-z0-9_-]+$/, { message: 'paymentMethod must be a token of A-Z, a-z, 0-9, _ or -' })
  .refine((v) => !barePan.test(v), { message: 'paymentMethod looks like a card number (PAN); send a token' });

export const CaptureMode = z.enum(['automatic', 'manual']);
export type CaptureMode = z.infer<typeof CaptureMode>;

/**
 * A charge's wallet part (docs/http-api.md#payments-with-a-wallet-part): `amount` of the total is held on the
 * merchant's wallet `walletId` first, the provider is charged for the rest.
 */
export const WalletPart = z.strictObject({
  walletId: WalletId,
  amount: MinorUnits,
});
export type WalletPart = z.infer<typeof WalletPart>;

/** How many providers a charge may fail over to. */
export const MAX_FALLBACK_PROVIDERS = 3;

/** `POST /v1/payments` body. Unknown fields are rejected; defaults: provider `simulator`, capture `automatic`. */
export const ChargeRequest = z
  .strictObject({
    orderId: OrderId,
    amount: Money,
    paymentMethod: PaymentMethodToken,
    provider: ProviderName.default('simulator'),
    /**
     * Providers to fail over to, in order, when every attempt at the current one provably never left (breaker open,
     * cool-down, connection refused); never after an unknown outcome, an answer or a decline.
     */
    fallbackProviders: z
      .array(ProviderName)
      .min(1, { message: 'fallbackProviders must name at least one provider (or be left out)' })
      .max(MAX_FALLBACK_PROVIDERS, {
        message: `fallbackProviders may name at most ${MAX_FALLBACK_PROVIDERS} providers`,
      })
      .optional(),
    capture: CaptureMode.default('automatic'),
    description: z
      .string()
      .max(500, { message: 'description must be at most 500 characters' })
      .refine((v) => !groupedPan.test(v), { message: 'description looks like it contains a card number (PAN)' })
      .optional(),
    wallet: WalletPart.optional().describe(
      'Part of the amount taken from the merchant’s wallet first (held, then captured or released); the provider is ' +
        'charged for the rest, nothing when the wallet covers it all. Automatic capture only.',
    ),
  })
  .superRefine((req, ctx) => {
    if (req.wallet !== undefined && req.wallet.amount > req.amount.value) {
      ctx.addIssue({
        code: 'custom',
        path: ['wallet', 'amount'],
        message: 'wallet.amount must not exceed amount.value',
      });
    }
    if (req.wallet !== undefined && req.capture === 'manual') {
      // The hold would have to outlive the authorization and follow partial captures: not offered (docs say so).
      ctx.addIssue({
        code: 'custom',
        path: ['wallet'],
        message: 'a wallet part is taken with capture automatic only',
      });
    }
    const seen = new Set([req.provider]);
    req.fallbackProviders?.forEach((name, i) => {
      if (seen.has(name)) {
        ctx.addIssue({
          code: 'custom',
          path: ['fallbackProviders', i],
          message: `fallbackProviders must not repeat a provider (${name} is already ${name === req.provider ? 'the provider' : 'listed'})`,
        });
      }
      seen.add(name);
    });
  });
/** A parsed charge request, defaults applied. */
export type ChargeRequest = z.output<typeof ChargeRequest>;
/** What a caller may send (provider and capture optional). */
export type ChargeRequestInput = z.input<typeof ChargeRequest>;

/** `POST /v1/payments/:key/capture` body; no amount = everything that is authorized. */
export const CaptureRequest = z.strictObject({
  amount: MinorUnits.optional(),
});
export type CaptureRequest = z.infer<typeof CaptureRequest>;

/** `POST /v1/payments/:key/refunds` body. */
export const RefundRequest = z.strictObject({
  amount: MinorUnits,
});
export type RefundRequest = z.infer<typeof RefundRequest>;

/** `POST /v1/payments/:key/resolve` body: an operator's verdict on a payment in `needs_review`. */
export const ResolveRequest = z.strictObject({
  outcome: z.enum(['succeeded', 'failed']),
  providerPaymentId: z.string().min(1).max(255).regex(printableAscii).optional(),
  note: z
    .string()
    .trim()
    .min(1, { message: 'note must not be empty' })
    .max(1000, { message: 'note must be at most 1000 characters' }),
});
export type ResolveRequest = z.infer<typeof ResolveRequest>;

const Iso = z.iso.datetime({ offset: true });
const NonNegative = z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER);

/** What every payment endpoint answers (docs/http-api.md#payments). Timestamps are ISO 8601. */
/**
 * One capture, refund or void of a payment, by its own idempotency key: `running` while it is still moving (its first
 * provider call, or a reconcile of an unknown outcome), `succeeded` once the provider confirmed it, `rejected` when the
 * provider refused it (nothing moved), `needs_review` when an operator must decide.
 */
export const OperationView = z.object({
  kind: z.enum(['capture', 'refund', 'void']),
  key: z.string(),
  amount: NonNegative,
  /** `failed`: never sent (every attempt refused before it left, `reason` says why); the same key may try again. */
  state: z.enum(['running', 'succeeded', 'rejected', 'failed', 'needs_review']),
  reason: z.string().optional(),
  providerCode: z.string().optional(),
});
export type OperationView = z.infer<typeof OperationView>;

/**
 * One move of the charge to the next provider of its list: every attempt at `from` provably never left (`reason`, e.g.
 * `breaker_open`, `cool_down`, `connect_refused`), so the charge was sent to `to` under a key of its own.
 */
export const FailoverView = z.object({
  from: z.string(),
  to: z.string(),
  reason: z.string(),
  at: Iso,
});
export type FailoverView = z.infer<typeof FailoverView>;

/**
 * An operator's verdict on a payment under review, as the payment recorded it once a look-up at the provider confirmed
 * it: who (`operator:<operatorId>`), what, the note, the review reason it answered and when.
 */
export const VerdictView = z.object({
  operator: z.string().optional(),
  outcome: z.enum(['succeeded', 'failed']),
  note: z.string(),
  /** The operation that was under review: the charge itself (`create`) or one of `operations[]`. */
  operation: z.enum(['create', 'capture', 'refund', 'void']),
  reviewReason: z.string(),
  at: Iso,
});
export type VerdictView = z.infer<typeof VerdictView>;

/**
 * A payment's wallet part as it stands: `held` (the hold is applied, or may be: its outcome is not settled yet),
 * `captured` (the wallet paid its part), `released` (nothing of it is taken, also when the hold was refused);
 * `refunded`: what refunds returned to the wallet.
 */
export const WalletPartView = z.object({
  walletId: z.string(),
  amount: NonNegative,
  status: z.enum(['held', 'captured', 'released']),
  refunded: NonNegative,
});
export type WalletPartView = z.infer<typeof WalletPartView>;

/** What the customer must do for a payment in `requires_action`: visit `url` (the provider's authentication page). */
export const NextAction = z.object({ type: z.literal('redirect_to_url'), url: z.string() });
export type NextAction = z.infer<typeof NextAction>;

export const PaymentView = z.object({
  key: z.string(),
  merchantId: z.string(),
  orderId: z.string(),
  status: PaymentStatus,
  amount: z.object({ value: NonNegative, currency: z.string() }),
  amountAuthorized: NonNegative,
  amountCaptured: NonNegative,
  amountRefunded: NonNegative,
  /**
   * What was authorized and will never be captured: the rest a partial capture released (a capture is final), or the
   * whole authorization once voided. Absent while nothing was released.
   */
  amountReleased: NonNegative.optional(),
  provider: z.string(),
  providerPaymentId: z.string().optional(),
  attempts: NonNegative,
  declineCode: z.string().optional(),
  /** Why a `failed` payment failed when it is not a decline: `provider_unavailable` = it never reached the provider. */
  failureReason: z.string().optional(),
  unknownSince: Iso.optional(),
  review: z.object({ reason: z.string() }).optional(),
  /** While `requires_action`: where the customer must go to authenticate the payment (3-D Secure and the like). */
  nextAction: NextAction.optional(),
  /** Captures, refunds and voids of this payment, oldest first (absent until the first one). */
  operations: z.array(OperationView).optional(),
  /** The charge's moves to a fallback provider, oldest first (absent when it never moved); `provider` holds it now. */
  failovers: z.array(FailoverView).optional(),
  /** Operators' verdicts on its reviews, oldest first (absent until the first one). */
  verdicts: z.array(VerdictView).optional(),
  /**
   * The wallet part of a payment that has one. `amountAuthorized`, `amountCaptured` and `amountRefunded` count the
   * provider's (card) part only; this one counts the wallet's.
   */
  wallet: WalletPartView.optional(),
  createdAt: Iso,
  updatedAt: Iso,
});
export type PaymentView = z.infer<typeof PaymentView>;

/** The fields of a charge the fingerprint covers: all of the parsed request, defaults applied, `undefined` left out. */
export interface ChargeSignificantFields {
  readonly operation: 'charge';
  readonly orderId: string;
  readonly amount: { readonly value: number; readonly currency: string };
  readonly paymentMethod: string;
  readonly provider: string;
  readonly fallbackProviders?: readonly string[];
  readonly capture: CaptureMode;
  readonly description?: string;
  readonly wallet?: { readonly walletId: string; readonly amount: number };
}

/**
 * What the fingerprint of a charge covers. Pure: the client hashes `canonicalJson(significantFields(req))` with SHA-256
 * outside workflow code. Defaults are applied first, so `{}` and `{ capture: 'automatic' }` fingerprint alike.
 */
export const significantFields = (req: ChargeRequest): ChargeSignificantFields => ({
  operation: 'charge',
  orderId: req.orderId,
  amount: { value: req.amount.value, currency: req.amount.currency },
  paymentMethod: req.paymentMethod,
  provider: req.provider,
  // Only when named: the fingerprints of requests without fallbacks stay what they were.
  ...(req.fallbackProviders === undefined ? {} : { fallbackProviders: req.fallbackProviders }),
  capture: req.capture,
  ...(req.description === undefined ? {} : { description: req.description }),
  // Only when there is one: the fingerprints of card-only requests stay what they were.
  ...(req.wallet === undefined ? {} : { wallet: { walletId: req.wallet.walletId, amount: req.wallet.amount } }),
});

/** What the fingerprint of a capture covers: the payment it targets and the amount (absent = all authorized). */
export const captureSignificantFields = (paymentKey: string, req: CaptureRequest) => ({
  operation: 'capture' as const,
  paymentKey,
  ...(req.amount === undefined ? {} : { amount: req.amount }),
});

/** What the fingerprint of a refund covers: the payment it targets and the amount. */
export const refundSignificantFields = (paymentKey: string, req: RefundRequest) => ({
  operation: 'refund' as const,
  paymentKey,
  amount: req.amount,
});

/**
 * Canonical JSON: object keys sorted by code unit, no whitespace, `undefined` members dropped. Two equal requests
 * always give the same string, whatever order their fields arrived in. Throws on values JSON cannot carry exactly.
 */
export const canonicalJson = (value: unknown): string => {
  if (value === null || typeof value === 'string' || typeof value === 'boolean') return JSON.stringify(value);
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) throw new TypeError('canonicalJson: non-finite number');
    return JSON.stringify(value);
  }
  if (Array.isArray(value))
    return `[${value.map((v: unknown) => (v === undefined ? 'null' : canonicalJson(v))).join(',')}]`;
  if (typeof value === 'object') {
    const obj = value as Record<string, unknown>;
    const members = Object.keys(obj)
      .sort()
      .flatMap((k) => (obj[k] === undefined ? [] : [`${JSON.stringify(k)}:${canonicalJson(obj[k])}`]));
    return `{${members.join(',')}}`;
  }
  throw new TypeError(`canonicalJson: cannot encode a ${typeof value}`);
};
