/**
 * `POST /webhooks/stripe`: verified with Stripe's own `constructEvent` on the raw body, parsed into the domain's
 * ProviderEvent, handed to the client only then. Signed with Stripe's test helper `generateTestHeaderString`.
 */
import type { FastifyInstance } from 'fastify';
import Stripe from 'stripe';
import type { ProviderEvent } from '../../src/domain/provider-payment';
import { STUB_STRIPE_SECRET, startStubApi, stubClient } from './stub';

const stripe = new Stripe('sk_test_unused');
const delivered: { provider: string; event: ProviderEvent; owner: unknown }[] = [];
let api: { app: FastifyInstance; url: string };

beforeAll(async () => {
  api = await startStubApi(
    stubClient({
      deliverProviderEvent: async (...args: never[]) => {
        const [provider, event, owner] = args as unknown as [string, ProviderEvent, unknown];
        delivered.push({ provider, event, owner });
        return 'payment';
      },
    }),
  );
});
afterAll(async () => {
  await api.app.close();
});
beforeEach(() => {
  delivered.length = 0;
});

const succeeded = (id: string) =>
  JSON.stringify({
    id,
    object: 'event',
    type: 'payment_intent.succeeded',
    created: 1_760_000_000,
    api_version: '2026-08-26.dahlia',
    data: {
      object: {
        id: 'pi_3Webhook',
        object: 'payment_intent',
        status: 'succeeded',
        amount: 2_000,
        amount_received: 2_000,
        currency: 'eur',
        created: 1_760_000_000,
        metadata: { merchant_id: 'm_stub', payment_key: 'key_1', reference: 'order_1' },
        latest_charge: 'ch_1',
      },
    },
  });

const post = (body: string, signature: string | undefined) =>
  fetch(`${api.url}/webhooks/stripe`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      ...(signature === undefined ? {} : { 'stripe-signature': signature }),
    },
    body,
  });

describe('Stripe webhooks', () => {
  it('a webhook signed with the endpoint secret is accepted (200) and delivered as our event, owner from metadata', async () => {
    const body = succeeded('evt_ok');
    const res = await post(
      body,
      stripe.webhooks.generateTestHeaderString({ payload: body, secret: STUB_STRIPE_SECRET }),
    );
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ received: true, delivery: 'payment' });
    expect(delivered).toEqual([
      {
        provider: 'stripe',
        owner: { merchantId: 'm_stub', key: 'key_1' },
        event: {
          eventId: 'evt_ok',
          type: 'payment.succeeded',
          created: 1_760_000_000,
          payment: expect.objectContaining({
            id: 'pi_3Webhook',
            status: 'succeeded',
            amount: 2_000,
            amountCaptured: 2_000,
            currency: 'EUR',
            reference: 'order_1',
          }),
        },
      },
    ]);
  });

  it.each([
    [
      'signed with another secret',
      (b: string) => stripe.webhooks.generateTestHeaderString({ payload: b, secret: 'whsec_other' }),
    ],
    [
      'signed over another body',
      (b: string) =>
        stripe.webhooks.generateTestHeaderString({ payload: b.replace('2000', '1'), secret: STUB_STRIPE_SECRET }),
    ],
    [
      'signed ten minutes ago',
      (b: string) =>
        stripe.webhooks.generateTestHeaderString({
          payload: b,
          secret: STUB_STRIPE_SECRET,
          timestamp: Math.floor(Date.now() / 1000) - 600,
        }),
    ],
    ['not signed', () => undefined],
  ])('a webhook %s is 400 and nothing is delivered', async (_name, sign) => {
    const body = succeeded('evt_bad');
    const res = await post(body, sign(body));
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({ error: { type: 'invalid_signature' } });
    expect(delivered).toEqual([]);
  });

  it('a signed event no payment acts on is 200 `ignored`, and nothing is delivered', async () => {
    const body = JSON.stringify({
      id: 'evt_cust',
      object: 'event',
      type: 'customer.created',
      created: 1,
      data: { object: {} },
    });
    const res = await post(
      body,
      stripe.webhooks.generateTestHeaderString({ payload: body, secret: STUB_STRIPE_SECRET }),
    );
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ received: true, delivery: 'ignored' });
    expect(delivered).toEqual([]);
  });

  it('a Stripe-signed body sent to the simulator route is refused (each provider its own scheme)', async () => {
    const body = succeeded('evt_cross');
    const res = await fetch(`${api.url}/webhooks/simulator`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'stripe-signature': stripe.webhooks.generateTestHeaderString({ payload: body, secret: STUB_STRIPE_SECRET }),
      },
      body,
    });
    expect(res.status).toBe(400);
    expect(delivered).toEqual([]);
  });
});
