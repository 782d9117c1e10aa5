import { startSimulator, type RunningSimulator } from '../../src/simulator/server';
import { call, createBody, newApiKey, newKey, startReceiver, waitFor, type Receiver } from './helpers';

let sim: RunningSimulator;
let receiver: Receiver;
beforeAll(async () => {
  sim = await startSimulator({ port: 0 });
  receiver = await startReceiver();
});
afterAll(async () => {
  await sim.close();
  await receiver.close();
});

/** A merchant whose webhooks go to the receiver, and a `pm_3ds` payment of it waiting for the customer. */
async function waitingPayment(capture: 'automatic' | 'manual') {
  const apiKey = newApiKey();
  await sim.setMerchant(apiKey, { webhook_url: receiver.url, webhook_secret: 'whsec_test' });
  const key = newKey();
  const created = await call(sim, 'POST', '/v1/payments', {
    apiKey,
    key,
    body: createBody({ payment_method: 'pm_3ds_required', capture, amount: 1500 }),
  });
  return { apiKey, key, created, id: String(created.body.id) };
}

const eventsOf = (id: string) =>
  receiver.received.filter((r) => (r.event.data.payment as { id?: string } | undefined)?.id === id);

describe('payments that wait for the customer (pm_3ds)', () => {
  it('answers create with requires_action and a redirect, with no effect and no webhook', async () => {
    const { apiKey, created, id } = await waitingPayment('automatic');
    expect(created.status).toBe(200);
    expect(created.body).toMatchObject({
      status: 'requires_action',
      amount: 1500,
      amount_captured: 0,
      next_action: { type: 'redirect_to_url', url: `${sim.url}/_sim/payments/${id}/authenticate` },
    });
    expect(sim.ledger(apiKey).effects).toEqual([]);
    await sim.flushWebhooks();
    expect(eventsOf(id)).toEqual([]);
  });

  it.each([
    ['automatic', 'succeeded', 1500, 'payment.succeeded'],
    ['manual', 'authorized', 0, 'payment.authorized'],
  ] as const)(
    'a %s payment the customer authenticates becomes %s: one create effect and its webhook',
    async (capture, status, captured, type) => {
      const { apiKey, key, id } = await waitingPayment(capture);
      const done = await call(sim, 'POST', `/_sim/payments/${id}/authenticate`, { body: { result: 'succeeded' } });
      expect(done.status).toBe(200);
      expect(done.body).toMatchObject({ id, status, amount_captured: captured });
      expect(done.body.next_action).toBeUndefined();
      expect(sim.ledger(apiKey).effects).toEqual([
        expect.objectContaining({ operation: 'create', idempotency_key: key, payment_id: id, amount: 1500 }),
      ]);
      const [event] = await waitFor('the webhook', () => eventsOf(id).length > 0 && eventsOf(id));
      expect(event?.event).toMatchObject({ type, data: { payment: { id, status } } });
      const again = await call(sim, 'POST', `/_sim/payments/${id}/authenticate`, { body: { result: 'succeeded' } });
      expect(again.status).toBe(400);
      expect(sim.ledger(apiKey).effects).toHaveLength(1);
    },
  );

  it('a failed authentication fails the payment (authentication_failed), no effect, a payment.failed webhook', async () => {
    const { apiKey, id } = await waitingPayment('automatic');
    const failed = await call(sim, 'POST', `/_sim/payments/${id}/authenticate`, { body: { result: 'failed' } });
    expect(failed.body).toMatchObject({ id, status: 'failed', decline_code: 'authentication_failed' });
    const looked = await call(sim, 'GET', `/v1/payments/${id}`, { apiKey });
    expect(looked.body).toMatchObject({ status: 'failed', decline_code: 'authentication_failed' });
    expect(sim.ledger(apiKey).effects).toEqual([]);
    const [event] = await waitFor('the webhook', () => eventsOf(id).length > 0 && eventsOf(id));
    expect(event?.event).toMatchObject({ type: 'payment.failed', data: { payment: { id, status: 'failed' } } });
  });

  it('cancels a payment waiting for the customer (a void of nothing authorized); the customer comes too late', async () => {
    const { apiKey, id } = await waitingPayment('manual');
    const cancelled = await call(sim, 'POST', `/v1/payments/${id}/cancel`, { apiKey, key: newKey(), body: {} });
    expect(cancelled.status).toBe(200);
    expect(cancelled.body).toMatchObject({ id, status: 'voided', amount_captured: 0 });
    expect(sim.ledger(apiKey).effects).toEqual([
      expect.objectContaining({ operation: 'void', payment_id: id, amount: 0 }),
    ]);
    const late = await call(sim, 'POST', `/_sim/payments/${id}/authenticate`, { body: { result: 'succeeded' } });
    expect(late.status).toBe(400);
    expect(sim.ledger(apiKey).effects).toHaveLength(1);
  });

  it('refuses to capture a payment waiting for the customer, and a bad customer answer', async () => {
    const { apiKey, id } = await waitingPayment('manual');
    const capture = await call(sim, 'POST', `/v1/payments/${id}/capture`, { apiKey, key: newKey(), body: {} });
    expect(capture.status).toBe(400);
    expect(capture.body).toMatchObject({ error: { code: 'payment_unexpected_state' } });
    const bad = await call(sim, 'POST', `/_sim/payments/${id}/authenticate`, { body: { result: 'maybe' } });
    expect(bad.status).toBe(400);
    const missing = await call(sim, 'POST', '/_sim/payments/pay_missing/authenticate', { body: { result: 'failed' } });
    expect(missing.status).toBe(404);
  });
});
