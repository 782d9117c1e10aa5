import { z } from 'zod';
import { FaultKind, Json, MerchantSettings, Operation } from './schemas';

/** A payment as the provider API answers it (`GET /v1/payments/:id`, snake_case). */
export const Payment = z.object({
  id: z.string(),
  /** `requires_action`: waits for the customer (a `pm_3ds` token); `failed`: the customer's authentication failed. */
  status: z.enum(['requires_action', 'authorized', 'succeeded', 'voided', 'failed']),
  amount: z.int(),
  amount_captured: z.int(),
  amount_refunded: z.int(),
  currency: z.string(),
  reference: z.string(),
  created: z.int(),
  metadata: z.record(z.string(), z.string()).optional(),
  /** What the customer must do, while `requires_action`. */
  next_action: z.object({ type: z.literal('redirect_to_url'), url: z.string() }).optional(),
  /** Why a `failed` payment failed (`authentication_failed`). */
  decline_code: z.string().optional(),
});
/** A payment as the provider API answers it. */
export type Payment = z.infer<typeof Payment>;

/** A stored payment: the public payment plus its owner and the key that created it (never answered). */
export const PaymentRecord = Payment.extend({
  api_key: z.string(),
  idempotency_key: z.string().nullable(),
  /** The capture mode a payment waiting for the customer takes once authenticated. */
  capture_mode: z.enum(['automatic', 'manual']).optional(),
});
/** A stored payment. */
export type PaymentRecord = z.infer<typeof PaymentRecord>;

/** A refund as the provider API answers it. */
export const Refund = z.object({
  id: z.string(),
  payment_id: z.string(),
  amount: z.int(),
  status: z.literal('succeeded'),
  created: z.int(),
});
/** A refund as the provider API answers it. */
export type Refund = z.infer<typeof Refund>;

/** A stored refund. */
export const RefundRecord = Refund.extend({ api_key: z.string() });
/** A stored refund. */
export type RefundRecord = z.infer<typeof RefundRecord>;

/** A committed response, replayed for a repeat of its idempotency key. */
export const StoredResponse = z.object({ status: z.int(), body: Json });
/** A committed response. */
export type StoredResponse = z.infer<typeof StoredResponse>;

/** The first outcome of an (api key, idempotency key) pair. */
export const IdempotencyRecord = z.object({
  api_key: z.string(),
  key: z.string(),
  fingerprint: z.string(),
  /** Simulator-clock seconds of the first request; the key expires `key_ttl_s` later. */
  created_s: z.number(),
  response: StoredResponse,
});
/** The first outcome of an (api key, idempotency key) pair. */
export type IdempotencyRecord = z.infer<typeof IdempotencyRecord>;

/** One committed change to a payment. */
export const LedgerEffect = z.object({
  api_key: z.string(),
  operation: Operation.exclude(['lookup']),
  idempotency_key: z.string().nullable(),
  reference: z.string(),
  payment_id: z.string(),
  amount: z.int(),
  at: z.int(),
});
/** One committed change to a payment. */
export type LedgerEffect = z.infer<typeof LedgerEffect>;

/** One provider request, recorded when it arrives; `status` stays null while in flight or when the socket was dropped. */
export const LedgerRequest = z.object({
  api_key: z.string(),
  operation: Operation,
  idempotency_key: z.string().nullable(),
  reference: z.string().nullable(),
  at: z.int(),
  /** `at` in milliseconds: retry gaps (Retry-After, backoff) are measured with it. */
  at_ms: z.int().optional(),
  status: z.int().nullable(),
  fault: FaultKind.optional(),
  replayed: z.boolean().optional(),
});
/** One provider request. */
export type LedgerRequest = z.infer<typeof LedgerRequest>;

/** What `GET /_sim/ledger` answers. */
export const Ledger = z.object({ effects: z.array(LedgerEffect), requests: z.array(LedgerRequest) });
/** What `GET /_sim/ledger` answers. */
export type Ledger = z.infer<typeof Ledger>;

/** Everything that survives a restart when `statePath` is set. */
export const SimState = z.object({
  version: z.literal(1),
  clock_offset_s: z.number(),
  seq: z.int().min(0),
  merchants: z.record(z.string(), MerchantSettings),
  payments: z.array(PaymentRecord),
  refunds: z.array(RefundRecord),
  idempotency: z.array(IdempotencyRecord),
  ledger: Ledger,
});
/** Everything that survives a restart. */
export type SimState = z.infer<typeof SimState>;

/**
 * What changed since the last save: one line of the state file's journal after its snapshot. Records are whole (a
 * payment as it is now), so applying the lines in order rebuilds the state; `requests` are appended, `request_updates`
 * replace requests saved before while still in flight.
 */
export const SimChanges = z.object({
  clock_offset_s: z.number(),
  seq: z.int().min(0),
  merchants: z.record(z.string(), MerchantSettings).optional(),
  payments: z.array(PaymentRecord).optional(),
  refunds: z.array(RefundRecord).optional(),
  idempotency: z.array(IdempotencyRecord).optional(),
  /** Keys that expired (scopes of records removed), applied before `idempotency`. */
  idempotency_expired: z.array(z.object({ api_key: z.string(), key: z.string() })).optional(),
  effects: z.array(LedgerEffect).optional(),
  requests: z.array(LedgerRequest).optional(),
  request_updates: z.array(z.object({ index: z.int().min(0), request: LedgerRequest })).optional(),
});
/** What changed since the last save. */
export type SimChanges = z.infer<typeof SimChanges>;
