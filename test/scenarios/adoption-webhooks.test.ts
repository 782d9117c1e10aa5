/**
 * Webhook routing by reference (the fallback when an event's metadata names no payment of ours) on the run's dev
 * server (visibility), through the real API and the real simulator. Merchants A and B share one provider api key, as
 * the product's merchants share one provider account: an event of the order's other payment must not reach A.
 */
import { randomUUID } from 'node:crypto';
import { WorkflowNotFoundError } from '@temporalio/client';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import pino from 'pino';
import { providerIdempotencyKey } from '../../src/activities/keys';
import { chargeWorkflowId } from '../../src/domain/ids';
import { type ParkedEvents, parkedEventWorkflowId, parkedEventsQuery } from '../../src/domain/parked-events';
import type { PaymentView } from '../../src/domain/payment';
import { RestProvider, simulatorCapabilities } from '../../src/providers/rest/adapter';
import type { ProviderPayment } from '../../src/providers/types';
import { signWebhook } from '../../src/simulator/signature';
import { connectDevServer } from '../helpers/servers';
import { type ApiWorld, WEBHOOK_SECRET, chargeBody, newKey, startWorld } from '../helpers/world';
import { eventually } from '../helpers/eventually';

let env: TestWorkflowEnvironment;
let h: ApiWorld;
let provider: RestProvider;

beforeAll(async () => {
  env = await connectDevServer();
  h = await startWorld(env, { api: true });
  // The same api key the workers use: what any other integration on the shared provider account would use.
  provider = new RestProvider({
    name: 'simulator',
    baseUrl: h.sim.url,
    apiKey: h.apiKey,
    capabilities: simulatorCapabilities(),
    connectTimeoutMs: 500,
    totalTimeoutMs: 2_000,
    logger: pino({ level: 'silent' }),
  });
}, 60_000);

afterAll(async () => {
  await provider?.close();
  await h?.close();
  await env?.teardown();
});

const nowS = () => Math.floor(Date.now() / 1000);
const viewOf = async (key: string) => (await h.request('GET', `/v1/payments/${key}`)).body as unknown as PaymentView;

/** Merchant A's charge whose create never commits (every attempt is reset after it was sent): A stays `unknown`. */
async function lostChargeOfA(): Promise<PaymentView> {
  const key = newKey();
  const body = chargeBody();
  h.sim.addFaults({
    rules: [
      {
        match: { operation: 'create', key: providerIdempotencyKey(h.a.id, 'create', key) },
        fault: 'reset_before_commit',
      },
    ],
  });
  await h.request('POST', '/v1/payments', { key, body });
  return eventually('A to be unknown', async () => {
    const view = await viewOf(key);
    return view.status === 'unknown' && view;
  });
}

/** The number of provider events A's workflow received. */
async function eventsSignalledTo(view: PaymentView): Promise<number> {
  const history = await env.client.workflow.getHandle(chargeWorkflowId(view.merchantId, view.key)).fetchHistory();
  return (history.events ?? []).filter(
    (e) => e.workflowExecutionSignaledEventAttributes?.signalName === 'providerEvent',
  ).length;
}

/** The parked events of a provider payment, once its parked-event workflow exists. */
const parkedOf = (providerPaymentId: string) =>
  eventually(`the event of ${providerPaymentId} to be parked`, async () => {
    try {
      return await env.client.workflow
        .getHandle(parkedEventWorkflowId('simulator', providerPaymentId))
        .query<ParkedEvents>(parkedEventsQuery);
    } catch (err) {
      if (err instanceof WorkflowNotFoundError) return undefined;
      throw err;
    }
  });

describe('webhook routing by reference, two merchants on one provider account', () => {
  it('the simulator’s event for a payment whose metadata names merchant B (no payment key) is parked, not applied to A', async () => {
    const a = await lostChargeOfA();

    // Same order, same amount, on the shared account; its metadata names B, but no payment of ours.
    const result = await provider.createPayment(
      {
        amount: a.amount.value,
        currency: a.amount.currency,
        reference: a.orderId,
        paymentMethod: 'pm_card_visa',
        capture: 'automatic',
        metadata: { merchant_id: h.b.id },
      },
      { idempotencyKey: `direct_${randomUUID()}`, attempt: 1 },
    );
    if (result.outcome === 'declined') throw new Error('declined');
    const theirs: ProviderPayment = result.payment;

    const parked = await parkedOf(theirs.id);
    expect(parked.input.reason).toBe('unmatched');
    await h.sim.flushWebhooks();
    expect(h.sim.webhookDeliveries().filter((d) => d.status !== 200)).toEqual([]);
    expect(await eventsSignalledTo(a)).toBe(0);
    const after = await viewOf(a.key);
    expect(after.status).toBe('unknown');
    expect(after.providerPaymentId).toBeUndefined();
  });

  it('an event without metadata whose amount is not A’s is parked, though A is the only payment of its order', async () => {
    const a = await lostChargeOfA();
    const paymentId = `pay_${randomUUID()}`;
    const raw = JSON.stringify({
      id: `evt_${randomUUID()}`,
      type: 'payment.succeeded',
      created: nowS(),
      data: {
        payment: {
          id: paymentId,
          status: 'succeeded',
          amount: a.amount.value + 500,
          amount_captured: a.amount.value + 500,
          amount_refunded: 0,
          currency: a.amount.currency,
          reference: a.orderId,
          created: nowS(),
        },
      },
    });

    const answer = await h.request('POST', '/webhooks/simulator', {
      token: null,
      rawBody: raw,
      headers: { 'sim-signature': signWebhook(WEBHOOK_SECRET, raw, nowS()) },
    });

    expect(answer.body).toEqual({ received: true, delivery: 'parked' });
    expect((await parkedOf(paymentId)).input.reason).toBe('unmatched');
    expect(await eventsSignalledTo(a)).toBe(0);
    const after = await viewOf(a.key);
    expect(after).toMatchObject({ status: 'unknown', amountAuthorized: 0 });
    expect(after.providerPaymentId).toBeUndefined();
  });
});
