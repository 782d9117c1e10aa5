import { z } from 'zod';
import type { ProviderPayment, ProviderRefund } from '../../domain/provider-payment';

// The fields of Stripe's objects this adapter reads (API version pinned by the `stripe` package). Objects are loose:
// Stripe adds fields in every release, and an extra field must not turn a success into an unknown outcome.

const minorUnits = z.number().int().nonnegative();

/** The charge behind a PaymentIntent (expanded `latest_charge`): where Stripe counts refunds. */
export const ChargeWire = z.object({
  id: z.string().min(1),
  amount: minorUnits,
  amount_captured: minorUnits,
  amount_refunded: minorUnits,
  currency: z.string().min(1),
  created: z.number().int().nonnegative(),
  payment_intent: z.string().min(1).nullish(),
  metadata: z.record(z.string(), z.string()).nullish(),
});
export type ChargeWire = z.infer<typeof ChargeWire>;

/** A PaymentIntent. */
export const PaymentIntentWire = z.object({
  id: z.string().min(1),
  status: z.string(),
  amount: minorUnits,
  amount_received: minorUnits,
  currency: z.string().min(1),
  created: z.number().int().nonnegative(),
  metadata: z.record(z.string(), z.string()).nullish(),
  latest_charge: z.union([z.string(), ChargeWire]).nullish(),
  last_payment_error: z
    .object({ type: z.string().optional(), code: z.string().nullish(), decline_code: z.string().nullish() })
    .nullish(),
  /** What the customer must do while `requires_action` (3-D Secure: `redirect_to_url`). */
  next_action: z
    .object({ type: z.string(), redirect_to_url: z.object({ url: z.string().nullish() }).nullish() })
    .nullish(),
});
export type PaymentIntentWire = z.infer<typeof PaymentIntentWire>;

/** A Refund. */
export const RefundWire = z.object({
  id: z.string().min(1),
  amount: minorUnits,
  status: z.string().nullish(),
  created: z.number().int().nonnegative(),
  payment_intent: z.string().nullish(),
});
export type RefundWire = z.infer<typeof RefundWire>;

/** The metadata name of our order id: Stripe has no reference field, so it travels (and is searched) in metadata. */
export const referenceMetadataKey = 'reference';

/**
 * Where a PaymentIntent stands in the domain's terms. `requires_capture`, `succeeded` and `canceled` are payments
 * (authorized, captured, voided); `requires_action` with a `redirect_to_url` is a payment waiting for the customer, and
 * one whose authentication failed (back to `requires_payment_method` with `payment_intent_authentication_failure`) is
 * `failed` (`authentication_failed`); a PaymentIntent still waiting for a payment method, a confirmation or another
 * action moved no money (`open`); `processing` may still move money (`processing`).
 */
export type IntentState =
  | { readonly kind: 'payment'; readonly payment: ProviderPayment }
  | { readonly kind: 'open'; readonly status: string; readonly declineCode?: string }
  | { readonly kind: 'processing' };

const statusOf: Readonly<Record<string, ProviderPayment['status']>> = {
  requires_capture: 'authorized',
  succeeded: 'succeeded',
  canceled: 'voided',
};

/** Stripe's code for a PaymentIntent whose customer failed (or abandoned) 3-D Secure. */
const AUTHENTICATION_FAILURE = 'payment_intent_authentication_failure';

/** A PaymentIntent in the domain's shape (currency upper case, refunds from its expanded charge). */
export function intentState(pi: PaymentIntentWire): IntentState {
  const status = customerStatus(pi) ?? (Object.hasOwn(statusOf, pi.status) ? statusOf[pi.status] : undefined);
  if (pi.status === 'processing') return { kind: 'processing' };
  if (status === undefined) {
    const error = pi.last_payment_error;
    const declineCode = error ? (error.decline_code ?? error.code ?? 'payment_failed') : undefined;
    return { kind: 'open', status: pi.status, ...(declineCode === undefined ? {} : { declineCode }) };
  }
  const charge = typeof pi.latest_charge === 'object' && pi.latest_charge !== null ? pi.latest_charge : undefined;
  const metadata = pi.metadata ?? {};
  return {
    kind: 'payment',
    payment: {
      id: pi.id,
      status,
      amount: pi.amount,
      amountCaptured: status === 'succeeded' ? pi.amount_received : 0,
      amountRefunded: charge?.amount_refunded ?? 0,
      currency: pi.currency.toUpperCase(),
      reference: metadata[referenceMetadataKey] ?? '',
      created: pi.created,
      ...(Object.keys(metadata).length > 0 ? { metadata } : {}),
      ...customerFields(pi, status),
    },
  };
}

/** The customer's part of a PaymentIntent: waiting for them (with a URL to send them to), or failed by them. */
function customerStatus(pi: PaymentIntentWire): ProviderPayment['status'] | undefined {
  if (pi.status === 'requires_action' && redirectUrl(pi) !== undefined) return 'requires_action';
  if (pi.status === 'requires_payment_method' && pi.last_payment_error?.code === AUTHENTICATION_FAILURE)
    return 'failed';
  return undefined;
}

const redirectUrl = (pi: PaymentIntentWire): string | undefined =>
  pi.next_action?.type === 'redirect_to_url' ? (pi.next_action.redirect_to_url?.url ?? undefined) : undefined;

function customerFields(
  pi: PaymentIntentWire,
  status: ProviderPayment['status'],
): Pick<ProviderPayment, 'nextAction' | 'declineCode'> {
  const url = redirectUrl(pi);
  if (status === 'requires_action' && url !== undefined) return { nextAction: { type: 'redirect_to_url', url } };
  return status === 'failed' ? { declineCode: 'authentication_failed' } : {};
}

/** A refunded charge (`charge.refunded` webhook) as its PaymentIntent's payment; null without a PaymentIntent. */
export function chargeAsPayment(charge: ChargeWire): ProviderPayment | null {
  if (!charge.payment_intent) return null;
  const metadata = charge.metadata ?? {};
  return {
    id: charge.payment_intent,
    status: 'succeeded',
    amount: charge.amount,
    amountCaptured: charge.amount_captured,
    amountRefunded: charge.amount_refunded,
    currency: charge.currency.toUpperCase(),
    reference: metadata[referenceMetadataKey] ?? '',
    created: charge.created,
    ...(Object.keys(metadata).length > 0 ? { metadata } : {}),
  };
}

/** A succeeded refund in the domain's shape. */
export const toRefund = (r: RefundWire, paymentId: string): ProviderRefund => ({
  id: r.id,
  paymentId: r.payment_intent ?? paymentId,
  amount: r.amount,
  status: 'succeeded',
  created: r.created,
});
