/**
 * The one provider call both peers make: create a payment with an idempotency key derived from merchant and key (the
 * same derivation and the same HTTP adapter as the real activities, so the provider's side costs the same).
 */
import { Context } from '@temporalio/activity';
import { providerIdempotencyKey } from '../../src/activities/keys';
import type { PaymentProvider } from '../../src/providers/types';

export interface BareChargeInput {
  readonly merchantId: string;
  readonly key: string;
  readonly orderId: string;
  readonly amount: number;
  readonly currency: string;
  readonly paymentMethod: string;
}

export interface BareChargeResult {
  readonly status: 'succeeded' | 'authorized' | 'declined';
  readonly providerPaymentId?: string;
}

/** Creates the payment at the provider, `attempt` for its logs; a provider failure throws (Temporal retries). */
export async function createPaymentWithKey(
  provider: PaymentProvider,
  input: BareChargeInput,
  attempt: number,
): Promise<BareChargeResult> {
  const result = await provider.createPayment(
    {
      amount: input.amount,
      currency: input.currency,
      reference: input.orderId,
      paymentMethod: input.paymentMethod,
      capture: 'automatic',
    },
    { idempotencyKey: providerIdempotencyKey(input.merchantId, 'create', input.key), attempt },
  );
  // The bare peer cannot wait for a customer: a payment that needs one counts as declined (the bench sends none).
  return result.outcome === 'declined' || result.outcome === 'requires_action'
    ? { status: 'declined' }
    : { status: result.outcome, providerPaymentId: result.payment.id };
}

/** The bare workflow's activities over one provider. */
export const createBareActivities = (provider: PaymentProvider) => ({
  async createPaymentBare(input: BareChargeInput): Promise<BareChargeResult> {
    return createPaymentWithKey(provider, input, Context.current().info.attempt);
  },
});
export type BareActivities = ReturnType<typeof createBareActivities>;
