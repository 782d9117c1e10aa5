import { randomUUID } from 'node:crypto';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { chargeWorkflowId } from '../../src/domain/ids';
import { parkedEventWorkflowId, parkedEventsQuery } from '../../src/domain/parked-events';
import type { PaymentView } from '../../src/domain/payment';
import { signWebhook } from '../../src/simulator/signature';
import { connectDevServer } from '../helpers/servers';
import { type ApiWorld, WEBHOOK_SECRET, chargeBody, newKey, startWorld, testRetry } from '../helpers/world';

let env: TestWorkflowEnvironment;
let h: ApiWorld;

beforeAll(async () => {
  env = await connectDevServer();
  h = await startWorld(env, {
    api: true,
    // Three create attempts in all: the local first one (shape 3) and two of the activity, so a payment whose first two
    // sends are dropped still gets the stored answer (see the webhook that arrives before the answer).
    retry: { create: { ...testRetry.create, maximumAttempts: 3 } },
  });
}, 60_000);

afterAll(async () => {
  await h?.close();
  await env?.teardown();
});

const nowS = () => Math.floor(Date.now() / 1000);

/** A simulator-shaped event for a payment; `metadata` names our payment unless null. */
function event(
  view: PaymentView,
  over: { type?: string; captured?: number; metadata?: Record<string, string> | null; id?: string } = {},
) {
  return {
    id: over.id ?? `evt_${randomUUID()}`,
    type: over.type ?? 'payment.succeeded',
    created: nowS(),
    data: {
      payment: {
        id: view.providerPaymentId ?? `pay_${randomUUID()}`,
        status: over.type === 'payment.voided' ? 'voided' : 'succeeded',
        amount: view.amount.value,
        amount_captured: over.captured ?? view.amount.value,
        amount_refunded: 0,
        currency: view.amount.currency,
        reference: view.orderId,
        created: nowS(),
        ...(over.metadata === null
          ? {}
          : { metadata: over.metadata ?? { merchant_id: view.merchantId, payment_key: view.key } }),
      },
    },
  };
}

/** Posts an event to the API (default: this file's world), signed at `t` (default now) unless a signature is given. */
function deliver(body: unknown, opts: { t?: number; signature?: string; raw?: string } = {}, api: ApiWorld = h) {
  const raw = opts.raw ?? JSON.stringify(body);
  const signature = opts.signature ?? signWebhook(WEBHOOK_SECRET, raw, opts.t ?? nowS());
  return api.request('POST', '/webhooks/simulator', {
    token: null,
    rawBody: raw,
    headers: { 'sim-signature': signature },
  });
}

async function authorizedPayment(api: ApiWorld = h): Promise<PaymentView> {
  const key = newKey();
  const answer = await api.request('POST', '/v1/payments', { key, body: chargeBody({ capture: 'manual' }) });
  expect(answer.body.status).toBe('authorized');
  return answer.body as unknown as PaymentView;
}

const viewOf = async (key: string, api: ApiWorld = h) =>
  (await api.request('GET', `/v1/payments/${key}`)).body as unknown as PaymentView;

async function signalsOf(view: PaymentView): Promise<number> {
  const history = await env.client.workflow.getHandle(chargeWorkflowId(view.merchantId, view.key)).fetchHistory();
  return (history.events ?? []).filter(
    (e) => e.workflowExecutionSignaledEventAttributes?.signalName === 'providerEvent',
  ).length;
}

describe('POST /webhooks/simulator', () => {
  it('applies a duplicated event once', async () => {
    const view = await authorizedPayment();
    const signalsBefore = await signalsOf(view);
    const captured = event(view);

    const first = await deliver(captured);
    const afterFirst = await viewOf(view.key);
    const second = await deliver(captured);
    const afterSecond = await viewOf(view.key);

    expect(first.status).toBe(200);
    expect(first.body).toEqual({ received: true, delivery: 'payment' });
    expect(second.status).toBe(200);
    // The redelivery is news to nobody: answered from a query, with no signal (no history, no action).
    expect(second.body).toEqual({ received: true, delivery: 'duplicate' });
    expect(afterFirst).toMatchObject({ status: 'succeeded', amountCaptured: view.amount.value });
    expect(afterSecond).toEqual(afterFirst);
    expect(await signalsOf(view)).toBe(signalsBefore + 1);
  });

  it('matches an event without metadata by its reference', async () => {
    const view = await authorizedPayment();

    const answer = await deliver(event(view, { metadata: null }));

    expect(answer.body).toEqual({ received: true, delivery: 'payment' });
    expect(await viewOf(view.key)).toMatchObject({ status: 'succeeded' });
  });

  it.each([
    ['a wrong signature', (raw: string) => ({ signature: signWebhook('whsec_someone_else', raw, nowS()) })],
    [
      'a tampered body',
      (raw: string) => ({ signature: signWebhook(WEBHOOK_SECRET, raw.replace('succeeded', 'voided'), nowS()) }),
    ],
    [
      'a timestamp older than 300 s',
      (raw: string) => ({ t: nowS() - 301, signature: signWebhook(WEBHOOK_SECRET, raw, nowS() - 301) }),
    ],
    ['no signature', () => ({ signature: '' })],
  ])('refuses %s with 400 and changes nothing', async (_what, sign) => {
    const view = await authorizedPayment();
    const raw = JSON.stringify(event(view));
    const signalsBefore = await signalsOf(view);

    const answer = await deliver(undefined, { raw, ...sign(raw) });

    expect(answer.status).toBe(400);
    expect(answer.body.error?.type).toBe('invalid_signature');
    expect(await viewOf(view.key)).toEqual(view);
    expect(await signalsOf(view)).toBe(signalsBefore);
  });

  it('handles the provider’s webhook that arrives before the API answered the charge', async () => {
    const body = chargeBody();
    // The provider commits and announces the payment, then drops the connection: the workflow retries with the same
    // key (and gets the stored answer) only after the webhook has gone through the API. Twice: the local first attempt
    // (shape 3) is handed at once to the activity, whose own first attempt is dropped too, so the resend that gets
    // the stored answer comes after the activity's backoff, as it did when the activity made the first attempt.
    h.sim.addFaults({
      rules: [
        { match: { operation: 'create', reference: body.orderId as string }, fault: 'commit_then_drop', times: 2 },
      ],
    });
    const key = newKey();

    const answer = await h.request('POST', '/v1/payments', { key, body });

    expect(answer.status).toBe(200);
    expect(answer.body).toMatchObject({ status: 'succeeded', amountCaptured: 1_000 });
    const view = answer.body as unknown as PaymentView;
    // In the payment's history the provider's event came in before the create's own answer (the activity's resend that
    // got the stored answer); the API answers from the first of them the payment applied (read by query since charges
    // start with `accept`, which completes at once).
    const events =
      (await env.client.workflow.getHandle(chargeWorkflowId(view.merchantId, view.key)).fetchHistory()).events ?? [];
    const signalled = events.findIndex(
      (e) => e.workflowExecutionSignaledEventAttributes?.signalName === 'providerEvent',
    );
    const answered = events.findIndex((e) => e.activityTaskCompletedEventAttributes);
    expect(signalled).toBeGreaterThan(-1);
    expect(signalled).toBeLessThan(answered);
    expect(h.sim.webhookDeliveries().every((d) => d.status === 200)).toBe(true);
    expect(h.ledger().effects.filter((e) => e.reference === body.orderId)).toHaveLength(1);
  });

  it('parks an event for a payment we never started, once per event id, and answers 200', async () => {
    const stranger = {
      id: `evt_${randomUUID()}`,
      type: 'payment.succeeded',
      created: nowS(),
      data: {
        payment: {
          id: `pay_${randomUUID()}`,
          status: 'succeeded',
          amount: 700,
          amount_captured: 700,
          amount_refunded: 0,
          currency: 'EUR',
          reference: `order_${randomUUID()}`,
          created: nowS(),
        },
      },
    };

    const first = await deliver(stranger);
    const second = await deliver(stranger);

    expect(first.body).toEqual({ received: true, delivery: 'parked' });
    expect(second.body).toEqual({ received: true, delivery: 'parked' });
    const parked = await env.client.workflow
      .getHandle(parkedEventWorkflowId('simulator', stranger.data.payment.id))
      .query(parkedEventsQuery);
    expect(parked.input.reason).toBe('unmatched');
    expect(parked.events.map((e) => e.eventId)).toEqual([stranger.id]);
  });

  it('parks a late event for a closed payment that its final view does not show', async () => {
    const key = newKey();
    const declined = await h.request('POST', '/v1/payments', {
      key,
      body: chargeBody({ paymentMethod: 'pm_decline_card' }),
    });
    expect(declined.body.status).toBe('declined');
    const handle = env.client.workflow.getHandle(chargeWorkflowId(h.a.id, key));
    await handle.result();
    const late = event(declined.body as unknown as PaymentView);

    const answer = await deliver(late);

    expect(answer.body).toEqual({ received: true, delivery: 'parked' });
    const parked = await env.client.workflow
      .getHandle(parkedEventWorkflowId('simulator', late.data.payment.id))
      .query(parkedEventsQuery);
    expect(parked.input).toMatchObject({ reason: 'payment_closed', merchantId: h.a.id, paymentKey: key });
  });

  it('refuses an unknown provider with 404 and an invalid event with 400', async () => {
    const raw = '{"id":"evt_1"}';
    const unknown = await h.request('POST', '/webhooks/acme', {
      token: null,
      rawBody: raw,
      headers: { 'sim-signature': signWebhook(WEBHOOK_SECRET, raw, nowS()) },
    });
    const invalid = await deliver(undefined, { raw });

    expect(unknown.status).toBe(404);
    expect(invalid.status).toBe(400);
    expect(invalid.body.error?.type).toBe('validation_error');
  });
});
