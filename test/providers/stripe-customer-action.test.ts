/**
 * The Stripe adapter's mapping of a PaymentIntent waiting for the customer (3-D Secure), on stripe-mock's shapes:
 * stripe-mock answers its PaymentIntent fixture, here changed to what Stripe shows for such a PaymentIntent
 * (`requires_action` with `next_action.redirect_to_url`) and for one whose customer failed the authentication
 * (`requires_payment_method` with `last_payment_error.code: payment_intent_authentication_failure`). The requests are
 * still validated by stripe-mock against Stripe's spec.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { type RunningStripeMock, resolveStripeMock, startStripeMock } from '../../scripts/lib/stripe-mock';
import { StripeProvider } from '../../src/providers/stripe';

const logger = pino({ level: 'silent' });
const ctx = (op: string) => ({ idempotencyKey: `${op}:m1:${randomUUID()}`, attempt: 1 });
const REDIRECT = 'https://hooks.stripe.com/3d_secure_2/hosted?merchant=acct_1&payment_intent=pi_1';

const provider = (apiBase: string) =>
  new StripeProvider({ secretKey: 'sk_test_123', apiBase, connectTimeoutMs: 1_000, totalTimeoutMs: 5_000, logger });

/** Writes a copy of the bundled fixtures with the PaymentIntent fixture changed. */
function fixturesWith(bundled: string, dir: string, name: string, paymentIntent: Record<string, unknown>): string {
  const all = JSON.parse(readFileSync(bundled, 'utf8')) as { resources: Record<string, Record<string, unknown>> };
  all.resources.payment_intent = { ...all.resources.payment_intent, ...paymentIntent };
  const file = path.join(dir, `${name}.json`);
  writeFileSync(file, JSON.stringify(all));
  return file;
}

const input = {
  amount: 2_000,
  currency: 'EUR',
  reference: 'order-3ds',
  paymentMethod: 'pm_card_authenticationRequired',
  capture: 'automatic',
} as const;

describe('Stripe adapter: PaymentIntents that wait for the customer (stripe-mock)', () => {
  let waiting: RunningStripeMock;
  let failedAuth: RunningStripeMock;

  beforeAll(async () => {
    const mock = await resolveStripeMock();
    const dir = mkdtempSync(path.join(tmpdir(), 'stripe-mock-3ds-'));
    [waiting, failedAuth] = await Promise.all([
      startStripeMock(mock.path, {
        fixtures: fixturesWith(mock.fixtures, dir, 'waiting', {
          status: 'requires_action',
          next_action: { type: 'redirect_to_url', redirect_to_url: { url: REDIRECT, return_url: 'https://shop/ret' } },
        }),
      }),
      startStripeMock(mock.path, {
        fixtures: fixturesWith(mock.fixtures, dir, 'failed', {
          status: 'requires_payment_method',
          last_payment_error: { type: 'invalid_request_error', code: 'payment_intent_authentication_failure' },
        }),
      }),
    ]);
  }, 120_000);

  afterAll(async () => {
    await Promise.all([waiting?.close(), failedAuth?.close()]);
  });

  it('a create answered requires_action + redirect_to_url is requires_action with nextAction, not a decline', async () => {
    const stripe = provider(waiting.url);
    const result = await stripe.createPayment(input, ctx('create'));
    expect(result).toMatchObject({
      outcome: 'requires_action',
      payment: { status: 'requires_action', nextAction: { type: 'redirect_to_url', url: REDIRECT }, amountCaptured: 0 },
    });
    // A look-up (the wait's schedule) reads the same: still waiting, not "no payment".
    await expect(stripe.getPayment('pi_waiting')).resolves.toMatchObject({
      id: 'pi_waiting',
      status: 'requires_action',
      nextAction: { url: REDIRECT },
    });
    await stripe.close();
  });

  it('a failed authentication is a decline authentication_failed on create, and failed on a look-up', async () => {
    const stripe = provider(failedAuth.url);
    await expect(stripe.createPayment(input, ctx('create'))).resolves.toEqual({
      outcome: 'declined',
      declineCode: 'authentication_failed',
    });
    await expect(stripe.getPayment('pi_failed')).resolves.toMatchObject({
      status: 'failed',
      declineCode: 'authentication_failed',
    });
    await stripe.close();
  });
});
