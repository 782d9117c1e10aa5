import Stripe from 'stripe';
import { z } from 'zod';
import type { ProviderEvent, ProviderPayment } from '../../domain/provider-payment';
import type { WebhookHeaders, WebhookVerdict, WebhookVerifier } from '../types';
import { ChargeWire, PaymentIntentWire, chargeAsPayment, intentState } from './wire';

/** The header Stripe signs its webhooks in. */
export const STRIPE_SIGNATURE_HEADER = 'Stripe-Signature';

/** The envelope of a Stripe event (its `data.object` is read per type). */
const StripeEventWire = z.object({
  id: z.string().min(1).max(255),
  type: z.string(),
  created: z.number().int().nonnegative(),
  data: z.object({ object: z.unknown() }),
});

/** Which PaymentIntent events a payment acts on, in the domain's event types. */
const intentEvents: Readonly<Record<string, ProviderEvent['type']>> = {
  'payment_intent.succeeded': 'payment.succeeded',
  'payment_intent.amount_capturable_updated': 'payment.authorized',
  'payment_intent.canceled': 'payment.voided',
  // A customer's failed 3-D Secure (the PaymentIntent reads `failed`, see intentState); other failures read `open`.
  'payment_intent.payment_failed': 'payment.failed',
};

// Stripe's verifier needs no key to check a signature: this placeholder never reaches Stripe.
const offline = new Stripe('sk_webhook_verification_only', { telemetry: false });

/**
 * Verifies Stripe webhooks with `stripe.webhooks.constructEvent` (HMAC-SHA256 of "t.rawBody" with the endpoint secret,
 * `Stripe-Signature: t=...,v1=...`, tolerance in seconds) and parses the events a payment acts on: PaymentIntent
 * succeeded / authorized (`amount_capturable_updated`) / canceled, and `charge.refunded`. Every other signed event is
 * `ignored` (answered 2xx so Stripe stops resending it).
 */
export class StripeWebhookVerifier implements WebhookVerifier {
  readonly provider: string;
  readonly signatureHeader = STRIPE_SIGNATURE_HEADER;
  readonly #secret: string;
  readonly #toleranceS: number;

  constructor(options: { readonly secret: string; readonly toleranceS: number; readonly provider?: string }) {
    this.provider = options.provider ?? 'stripe';
    this.#secret = options.secret;
    this.#toleranceS = options.toleranceS;
  }

  verify(rawBody: string, headers: WebhookHeaders, nowS?: number): WebhookVerdict {
    const header = headers[STRIPE_SIGNATURE_HEADER.toLowerCase()];
    if (typeof header !== 'string' || header === '') return { kind: 'refused', reason: 'missing' };
    let verified: unknown;
    try {
      verified = offline.webhooks.constructEvent(
        rawBody,
        header,
        this.#secret,
        this.#toleranceS,
        undefined,
        // Stripe's verifier takes milliseconds here.
        nowS === undefined ? undefined : nowS * 1000,
      );
    } catch (err) {
      if (err instanceof Stripe.errors.StripeSignatureVerificationError) {
        return { kind: 'refused', reason: /timestamp outside the tolerance/i.test(err.message) ? 'stale' : 'mismatch' };
      }
      // constructEvent parses the body after the signature matched: a signed body that is not JSON.
      return { kind: 'invalid', message: 'The body is not valid JSON', issues: [] };
    }
    const envelope = StripeEventWire.safeParse(verified);
    if (!envelope.success) return invalid(envelope.error);
    const e = envelope.data;
    let payment: ProviderPayment | null = null;
    let type: ProviderEvent['type'] | undefined;
    if (Object.hasOwn(intentEvents, e.type)) {
      const pi = PaymentIntentWire.safeParse(e.data.object);
      if (!pi.success) return invalid(pi.error, 'data.object');
      const state = intentState(pi.data);
      if (state.kind === 'payment') {
        payment = state.payment;
        type = intentEvents[e.type];
      }
    } else if (e.type === 'charge.refunded') {
      const charge = ChargeWire.safeParse(e.data.object);
      if (!charge.success) return invalid(charge.error, 'data.object');
      payment = chargeAsPayment(charge.data);
      type = 'refund.succeeded';
    }
    if (payment === null || type === undefined) return { kind: 'ignored', eventType: e.type };
    return { kind: 'event', eventType: e.type, event: { eventId: e.id, type, created: e.created, payment } };
  }
}

const invalid = (error: z.ZodError, prefix?: string): WebhookVerdict => ({
  kind: 'invalid',
  message: 'The event is invalid',
  issues: error.issues.map((i) => ({
    path: [prefix, ...i.path.map(String)].filter((p) => p !== undefined && p !== '').join('.') || '(body)',
    message: i.message,
  })),
});
