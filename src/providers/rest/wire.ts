import { z } from 'zod';
import type { ProviderPayment, ProviderRefund } from '../../domain/provider-payment';

// The simulator's wire shapes (the provider API src/simulator serves, snake_case), each transformed into the camelCase type the product uses.
// Objects are not strict: a provider may add fields, and an extra field must not turn a success into an unknown.

const minorUnits = z.number().int().nonnegative();

/** A payment as the provider API serves it. */
export const ProviderPaymentWire = z.object({
  id: z.string().min(1),
  status: z.enum(['requires_action', 'authorized', 'succeeded', 'voided', 'failed']),
  amount: minorUnits,
  amount_captured: minorUnits,
  amount_refunded: minorUnits,
  currency: z.string().min(1),
  reference: z.string(),
  created: z.number(),
  metadata: z.record(z.string(), z.string()).optional(),
  next_action: z.object({ type: z.literal('redirect_to_url'), url: z.string().min(1) }).optional(),
  decline_code: z.string().optional(),
});
export type ProviderPaymentWire = z.infer<typeof ProviderPaymentWire>;

/** The wire payment in the domain's shape. */
export const toPayment = (p: ProviderPaymentWire): ProviderPayment => ({
  id: p.id,
  status: p.status,
  amount: p.amount,
  amountCaptured: p.amount_captured,
  amountRefunded: p.amount_refunded,
  currency: p.currency,
  reference: p.reference,
  created: p.created,
  ...(p.metadata ? { metadata: p.metadata } : {}),
  ...(p.next_action ? { nextAction: { type: p.next_action.type, url: p.next_action.url } } : {}),
  ...(p.decline_code ? { declineCode: p.decline_code } : {}),
});

/** Any payment answer (capture, void, get, list items). */
export const ProviderPaymentSchema = ProviderPaymentWire.transform(toPayment);

/**
 * The answer to a create: `authorized`, `succeeded`, or `requires_action` with the customer's `next_action`; anything
 * else is not an answer we can act on, so it is an unparseable 2xx (OutcomeUnknown) and the workflow reconciles by
 * lookup.
 */
export const CreatedPaymentSchema = ProviderPaymentWire.extend({
  status: z.enum(['authorized', 'succeeded', 'requires_action']),
})
  .refine((p) => p.status !== 'requires_action' || p.next_action !== undefined, {
    message: 'requires_action without next_action',
    path: ['next_action'],
  })
  .transform((p) => ({ ...toPayment(p), status: p.status }));

/** A refund as the provider API serves it. */
export const ProviderRefundWire = z.object({
  id: z.string().min(1),
  payment_id: z.string().min(1),
  amount: minorUnits,
  status: z.literal('succeeded'),
  created: z.number(),
});

export const ProviderRefundSchema = ProviderRefundWire.transform((r): ProviderRefund => ({
  id: r.id,
  paymentId: r.payment_id,
  amount: r.amount,
  status: r.status,
  created: r.created,
}));

/** `GET /v1/payments?...` */
export const ProviderPaymentListSchema = z
  .object({ data: z.array(ProviderPaymentSchema), has_more: z.boolean() })
  .transform((l) => ({ data: l.data, hasMore: l.has_more }));
