import { z } from 'zod';

/** A JSON value, as stored for idempotent replays and persisted state. */
export const Json = z.json();
/** A JSON value. */
export type Json = z.infer<typeof Json>;

/** The provider operations the ledger, the fault rules and the idempotency fingerprint distinguish. */
export const Operation = z.enum(['create', 'capture', 'void', 'refund', 'lookup']);
/** A provider operation. */
export type Operation = z.infer<typeof Operation>;

/** The operations that change a payment (everything but lookup). */
export type EffectOperation = Exclude<Operation, 'lookup'>;

/** Fault kinds the simulator can inject. */
export const FaultKind = z.enum(['commit_then_drop', 'reset_before_commit', 'latency', 'status']);
/** A fault kind. */
export type FaultKind = z.infer<typeof FaultKind>;

const amount = z.int().positive().max(99_999_999_999);

/** `POST /v1/payments` body. */
export const CreatePaymentBody = z.object({
  amount,
  currency: z.string().regex(/^[A-Z]{3}$/, 'expected an ISO 4217 code in upper case'),
  reference: z.string().min(1).max(255),
  payment_method: z.string().min(1).max(255),
  capture: z.enum(['automatic', 'manual']),
  /** Free-form string pairs kept on the payment and echoed in answers and webhooks (like Stripe's metadata). */
  metadata: z
    .record(z.string().max(40), z.string().max(500))
    .refine((m) => Object.keys(m).length <= 20, {
      message: 'at most 20 metadata keys',
    })
    .optional(),
});
/** `POST /v1/payments` body. */
export type CreatePaymentBody = z.infer<typeof CreatePaymentBody>;

/** `POST /v1/payments/:id/capture` body; no amount captures everything authorized. */
export const CapturePaymentBody = z.object({ amount: amount.optional() });
/** `POST /v1/payments/:id/capture` body. */
export type CapturePaymentBody = z.infer<typeof CapturePaymentBody>;

/** `POST /v1/payments/:id/void` body (nothing significant). */
export const VoidPaymentBody = z.object({});

/** `POST /v1/payments/:id/refunds` body. */
export const RefundPaymentBody = z.object({ amount });
/** `POST /v1/payments/:id/refunds` body. */
export type RefundPaymentBody = z.infer<typeof RefundPaymentBody>;

const unixSeconds = z.coerce.number().int().min(0);

/** `GET /v1/payments` query string. */
export const ListPaymentsQuery = z.object({
  idempotency_key: z.string().min(1).optional(),
  reference: z.string().min(1).optional(),
  created_gte: unixSeconds.optional(),
  created_lt: unixSeconds.optional(),
  starting_after: z.string().min(1).optional(),
  limit: z.coerce.number().int().min(1).max(100).default(10),
});
/** `GET /v1/payments` query string. */
export type ListPaymentsQuery = z.infer<typeof ListPaymentsQuery>;

/** Merchant settings; every field has a default, so `{}` resets a merchant to the defaults. */
export const MerchantSettings = z.object({
  idempotency: z.boolean().default(true),
  key_ttl_s: z.int().positive().default(86_400),
  webhook_url: z.url({ protocol: /^https?$/ }).optional(),
  webhook_secret: z.string().min(1).optional(),
  /** Deliver every event twice, so receivers can prove they deduplicate. */
  webhook_duplicate: z.boolean().default(false),
  /** Hold every event this long before delivery (with reorder: the length of the reordering window). */
  webhook_delay_ms: z.int().min(0).max(600_000).optional(),
  /** Hold events and deliver each batch in reverse order, so receivers can prove monotonic application. */
  webhook_reorder: z.boolean().default(false),
});
/** Merchant settings after defaults. */
export type MerchantSettings = z.infer<typeof MerchantSettings>;
/** Merchant settings as a caller writes them. */
export type MerchantSettingsInput = z.input<typeof MerchantSettings>;

/** `PUT /_sim/merchants/:apiKey` body: a webhook needs a secret to be signed with. */
export const MerchantSettingsBody = MerchantSettings.refine((s) => s.webhook_url === undefined || !!s.webhook_secret, {
  message: 'webhook_secret is required with webhook_url',
  path: ['webhook_secret'],
});

/** One fault-injection rule. */
export const FaultRule = z.object({
  match: z
    .object({
      operation: Operation.optional(),
      reference: z.string().optional(),
      key: z.string().optional(),
    })
    .default({}),
  fault: FaultKind,
  status: z.int().min(400).max(599).default(503),
  retry_after_s: z.int().min(0).optional(),
  latency_ms: z.int().min(0).max(600_000).default(1000),
  /** How many matching requests the rule hits before it is spent; absent: unlimited. */
  times: z.int().positive().optional(),
  /** Chance that a matching request is hit, drawn from the seeded PRNG; absent: always. */
  probability: z.number().min(0).max(1).optional(),
});
/** A fault rule after defaults. */
export type FaultRule = z.infer<typeof FaultRule>;

/** `POST /_sim/faults` body. */
export const FaultsBody = z.object({ rules: z.array(FaultRule).min(1), seed: z.int().optional() });
/** `POST /_sim/faults` body as a caller writes it. */
export type FaultsBodyInput = z.input<typeof FaultsBody>;

/** `POST /_sim/clock/advance` body. */
export const ClockAdvanceBody = z.object({
  seconds: z
    .number()
    .min(0)
    .max(10 * 365 * 86_400),
});

/** `POST /_sim/payments/:id/authenticate` body: what the customer did. */
export const AuthenticateBody = z.object({ result: z.enum(['succeeded', 'failed']) });
