/**
 * Provider events in our camelCase, as zod schemas: the API converts and checks a verified webhook into a
 * {@link ProviderEvent} before it reaches a workflow. Kept apart from `definitions.ts` (the update, signal and query
 * definitions workflow code imports) so that workflow bundles carry no zod.
 */
import { z } from 'zod';

/** A payment as the provider reports it (camelCase); the same shape as the adapters' `ProviderPayment`, both ways. */
export const ProviderPaymentState = z.object({
  id: z.string().min(1),
  status: z.enum(['authorized', 'succeeded', 'voided']),
  amount: z.number().int().nonnegative(),
  amountCaptured: z.number().int().nonnegative(),
  amountRefunded: z.number().int().nonnegative(),
  currency: z.string(),
  reference: z.string(),
  /** Unix seconds on the provider's clock. */
  created: z.number().int().nonnegative(),
  /** Echoed create metadata (`merchant_id`, `payment_key`): how a webhook finds its workflow. */
  metadata: z.record(z.string(), z.string()).optional(),
});
export type ProviderPaymentState = z.infer<typeof ProviderPaymentState>;

/** A provider webhook event, verified and converted to camelCase by the API before it is signalled. */
export const ProviderEvent = z.object({
  eventId: z.string().min(1),
  type: z.enum(['payment.succeeded', 'payment.authorized', 'payment.voided', 'refund.succeeded']),
  /** Unix seconds on the provider's clock. */
  created: z.number().int().nonnegative(),
  payment: ProviderPaymentState,
});
export type ProviderEvent = z.infer<typeof ProviderEvent>;
