/**
 * A provider payment, refund and capability set in the product's own words (camelCase): the one shape every adapter
 * maps its wire format into, and the shape the workflows, the webhook router and the sweep read. Adapters own their
 * wire formats (src/providers/<name>/); nothing outside an adapter sees a provider's field names.
 */
import { z } from 'zod';
import type { RetryOverrides } from './retry-policy';

const minorUnits = z.number().int().nonnegative();

/** A payment as the provider reports it. */
export const ProviderPayment = z.object({
  id: z.string().min(1),
  /**
   * `authorized` (capturable), `succeeded` (captured in full or in part), `voided` (released, nothing moved);
   * `requires_action`: waits for the customer (`nextAction`), nothing authorized; `failed`: the customer's
   * authentication failed (`declineCode`), nothing moved.
   */
  status: z.enum(['requires_action', 'authorized', 'succeeded', 'voided', 'failed']),
  amount: minorUnits,
  amountCaptured: minorUnits,
  amountRefunded: minorUnits,
  /** ISO 4217, upper case (an adapter converts the provider's own casing). */
  currency: z.string(),
  /** Our order id as the provider keeps it (a field, or metadata where the provider has no such field). */
  reference: z.string(),
  /** Unix seconds on the provider's clock. */
  created: z.number().int().nonnegative(),
  /** Echoed create metadata (`merchant_id`, `payment_key`): how a webhook finds its workflow. */
  metadata: z.record(z.string(), z.string()).optional(),
  /** What the customer must do while `requires_action`. */
  nextAction: z.object({ type: z.literal('redirect_to_url'), url: z.string() }).optional(),
  /** Why a `failed` payment failed (`authentication_failed`). */
  declineCode: z.string().optional(),
});
export type ProviderPayment = z.infer<typeof ProviderPayment>;

/** A refund the provider confirmed. */
export const ProviderRefund = z.object({
  id: z.string().min(1),
  paymentId: z.string().min(1),
  amount: minorUnits,
  status: z.literal('succeeded'),
  /** Unix seconds on the provider's clock. */
  created: z.number().int().nonnegative(),
});
export type ProviderRefund = z.infer<typeof ProviderRefund>;

/**
 * What a provider can do; the retry specs and the activities derive their safety from these flags. The API's
 * configuration passes them in a payment's input (lean history shape); the worker checks them against its adapter's.
 */
export const ProviderCapabilities = z.strictObject({
  /** The provider stores the first response per idempotency key and replays it. */
  idempotencyKeys: z.boolean(),
  /** How long the provider remembers a key, in seconds (null: no keys). A resend after this is a new effect. */
  keyTtlSeconds: z.number().int().positive().nullable(),
  /** A payment can be found by the idempotency key that created it. */
  lookupByKey: z.boolean(),
  /** Payments can be found by our reference (the order id). */
  lookupByReference: z.boolean(),
  /**
   * The client's own limits (per-call deadline, pages of a look-up by reference): what one activity attempt may take.
   * Reported by the adapter; absent in capabilities recorded before adapters reported them.
   */
  callLimits: z
    .strictObject({
      callTimeoutMs: z.number().int().positive().max(Number.MAX_SAFE_INTEGER),
      referencePages: z.number().int().positive(),
    })
    .optional(),
});
export type ProviderCapabilities = z.infer<typeof ProviderCapabilities>;

/**
 * The worker's view of one provider: its adapter's capabilities and the worker's retry presets (`RETRY_*`, empty: the
 * production presets). A shape-3 charge learns it from the worker in its first workflow task (recorded in the local
 * activity's marker, so replay does not depend on today's configuration) and runs every later activity, its reconcile
 * and its continuation with it.
 */
export interface WorkerProviderConfig {
  readonly capabilities: ProviderCapabilities;
  readonly retry: RetryOverrides;
}

/** A provider webhook event, verified and parsed by its adapter before it is signalled. */
export const ProviderEvent = z.object({
  eventId: z.string().min(1),
  type: z.enum(['payment.succeeded', 'payment.authorized', 'payment.voided', 'payment.failed', 'refund.succeeded']),
  /** Unix seconds on the provider's clock. */
  created: z.number().int().nonnegative(),
  payment: ProviderPayment,
});
export type ProviderEvent = z.infer<typeof ProviderEvent>;
