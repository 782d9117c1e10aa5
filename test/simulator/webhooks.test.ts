import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { startSimulator, type RunningSimulator } from '../../src/simulator/server';
import { verifySimulatorSignature } from '../../src/providers/rest/webhook';
import { call, createBody, newApiKey, newKey, startReceiver, waitFor, type Receiver } from './helpers';

const SECRET = 'whsec_test';
let sim: RunningSimulator;
const receivers: Receiver[] = [];

beforeAll(async () => {
  sim = await startSimulator({ port: 0, webhookRetry: { attempts: 3, baseDelayMs: 20 } });
});
afterEach(async () => {
  await Promise.all(receivers.splice(0).map((r) => r.close()));
});
afterAll(() => sim.close());

async function merchantWithReceiver(
  statusFor?: (n: number) => number,
  settings: Record<string, unknown> = {},
): Promise<{ apiKey: string; receiver: Receiver }> {
  const receiver = await startReceiver(statusFor);
  receivers.push(receiver);
  const apiKey = newApiKey();
  await sim.setMerchant(apiKey, { webhook_url: receiver.url, webhook_secret: SECRET, ...settings });
  return { apiKey, receiver };
}

const nowS = () => Math.floor(Date.now() / 1000);

describe('webhooks', () => {
  it('posts a signed event for an effect', async () => {
    const { apiKey, receiver } = await merchantWithReceiver();
    const created = await call(sim, 'POST', '/v1/payments', { apiKey, key: newKey(), body: createBody() });
    const [got] = await waitFor('one delivery', () => receiver.received.length === 1 && receiver.received);

    expect(got?.event).toEqual({
      id: expect.stringMatching(/^evt_/),
      type: 'payment.succeeded',
      created: created.body.created,
      data: { payment: created.body },
    });
    const signature = got?.headers['sim-signature'];
    expect(signature).toMatch(/^t=\d+,v1=[0-9a-f]{64}$/);
    expect(verifySimulatorSignature(SECRET, String(signature), got?.raw ?? '', 300, nowS())).toEqual({
      ok: true,
      t: expect.any(Number),
    });
  });

  it('echoes create metadata in the payment and its webhook (extension of the contract)', async () => {
    const { apiKey, receiver } = await merchantWithReceiver();
    const metadata = { merchant_id: 'm_1', payment_key: 'k_1' };
    const created = await call(sim, 'POST', '/v1/payments', { apiKey, key: newKey(), body: createBody({ metadata }) });
    expect(created.body.metadata).toEqual(metadata);
    const [got] = await waitFor('one delivery', () => receiver.received.length === 1 && receiver.received);
    expect(got?.event).toMatchObject({ data: { payment: { metadata } } });
    const tooMany = Object.fromEntries(Array.from({ length: 21 }, (_, i) => [`k${i}`, 'v']));
    const rejected = await call(sim, 'POST', '/v1/payments', {
      apiKey,
      key: newKey(),
      body: createBody({ metadata: tooMany }),
    });
    expect(rejected.status).toBe(400);
  });

  it('announces authorize, capture, refund and void with their own types, in effect order', async () => {
    const { apiKey, receiver } = await merchantWithReceiver();
    const { body: p1 } = await call(sim, 'POST', '/v1/payments', {
      apiKey,
      key: newKey(),
      body: createBody({ capture: 'manual' }),
    });
    await call(sim, 'POST', `/v1/payments/${String(p1.id)}/capture`, { apiKey, key: newKey() });
    const refund = await call(sim, 'POST', `/v1/payments/${String(p1.id)}/refunds`, {
      apiKey,
      key: newKey(),
      body: { amount: 10 },
    });
    const { body: p2 } = await call(sim, 'POST', '/v1/payments', {
      apiKey,
      key: newKey(),
      body: createBody({ capture: 'manual' }),
    });
    await call(sim, 'POST', `/v1/payments/${String(p2.id)}/void`, { apiKey, key: newKey() });
    await sim.flushWebhooks();

    expect(receiver.received.map((r) => r.event.type)).toEqual([
      'payment.authorized',
      'payment.succeeded',
      'refund.succeeded',
      'payment.authorized',
      'payment.voided',
    ]);
    const refundEvent = receiver.received[2]?.event;
    expect(refundEvent?.data).toEqual({
      payment: expect.objectContaining({ id: p1.id, amount_refunded: 10 }),
      refund: refund.body,
    });
    // Each event carries the payment as it was at its effect, not as it is now.
    expect(receiver.received[0]?.event.data.payment).toMatchObject({ status: 'authorized', amount_captured: 0 });
  });

  it('retries after a 500 from the receiver and redelivers the same event', async () => {
    const { apiKey, receiver } = await merchantWithReceiver((n) => (n === 0 ? 500 : 200));
    await call(sim, 'POST', '/v1/payments', { apiKey, key: newKey(), body: createBody() });
    await waitFor('the retry', () => receiver.received.length === 2);
    // The receiver sees the retry before the simulator has logged the answer to it.
    await sim.flushWebhooks();
    const [first, second] = receiver.received;
    expect(second?.event.id).toBe(first?.event.id);
    expect(second?.raw).toBe(first?.raw);
    const attempts = sim.webhookDeliveries().filter((d) => d.event_id === first?.event.id);
    expect(attempts.map((d) => [d.attempt, d.status])).toEqual([
      [1, 500],
      [2, 200],
    ]);
  });

  it('gives up after the configured attempts, also on network errors', async () => {
    const { apiKey, receiver } = await merchantWithReceiver(() => 500);
    const { body: payment } = await call(sim, 'POST', '/v1/payments', { apiKey, key: newKey(), body: createBody() });
    await sim.flushWebhooks();
    // Three attempts of this payment's one event, each answered 500, then nothing more.
    expect(receiver.received).toHaveLength(3);
    const eventId = receiver.received[0]?.event.id;
    expect(receiver.received.map((r) => [r.event.id, r.event.type, r.event.data.payment?.id])).toEqual(
      Array.from({ length: 3 }, () => [eventId, 'payment.succeeded', payment.id]),
    );
    expect(
      sim
        .webhookDeliveries()
        .filter((d) => d.event_id === eventId)
        .map((d) => [d.attempt, d.status]),
    ).toEqual([
      [1, 500],
      [2, 500],
      [3, 500],
    ]);

    // Nobody listening: a simulator of its own, so every delivery it logs is this payment's event.
    const closed = await startReceiver();
    await closed.close();
    const own = await startSimulator({ port: 0, webhookRetry: { attempts: 3, baseDelayMs: 20 } });
    try {
      const unreachable = newApiKey();
      await own.setMerchant(unreachable, { webhook_url: closed.url, webhook_secret: SECRET });
      const created = await call(own, 'POST', '/v1/payments', {
        apiKey: unreachable,
        key: newKey(),
        body: createBody(),
      });
      expect(created.body).toMatchObject({ status: 'succeeded', amount_captured: 1000 });
      await own.flushWebhooks();
      const attempts = own.webhookDeliveries();
      expect(attempts.map((d) => [d.type, d.attempt, d.status])).toEqual([
        ['payment.succeeded', 1, null],
        ['payment.succeeded', 2, null],
        ['payment.succeeded', 3, null],
      ]);
      expect(new Set(attempts.map((d) => d.event_id)).size).toBe(1);
      for (const d of attempts) expect(d.error).toMatch(/ECONNREFUSED/);
    } finally {
      await own.close();
    }
  });

  it('delivers every event twice with webhook_duplicate', async () => {
    const { apiKey, receiver } = await merchantWithReceiver(undefined, { webhook_duplicate: true });
    await call(sim, 'POST', '/v1/payments', { apiKey, key: newKey(), body: createBody() });
    const { body: payment } = await call(sim, 'POST', '/v1/payments', { apiKey, key: newKey(), body: createBody() });
    await sim.flushWebhooks();
    // Two events (one per payment), each delivered twice: the second copy is the same event, byte for byte.
    const forThis = receiver.received.filter((r) => r.event.data.payment?.id === payment.id);
    expect(forThis).toHaveLength(2);
    expect(forThis[1]?.event.id).toBe(forThis[0]?.event.id);
    expect(forThis[1]?.raw).toBe(forThis[0]?.raw);
    expect(sim.webhookDeliveries().filter((d) => d.event_id === forThis[0]?.event.id)).toHaveLength(2);
    expect(receiver.received).toHaveLength(4);
  });

  it('holds events and delivers them in reverse order with webhook_reorder', async () => {
    const { apiKey, receiver } = await merchantWithReceiver(undefined, {
      webhook_reorder: true,
      webhook_delay_ms: 60_000,
    });
    const { body } = await call(sim, 'POST', '/v1/payments', {
      apiKey,
      key: newKey(),
      body: createBody({ capture: 'manual' }),
    });
    await call(sim, 'POST', `/v1/payments/${String(body.id)}/capture`, { apiKey, key: newKey() });
    expect(receiver.received).toHaveLength(0);
    await call(sim, 'POST', '/_sim/webhooks/flush');
    expect(receiver.received.map((r) => r.event.type)).toEqual(['payment.succeeded', 'payment.authorized']);
  });

  it('reorders within the window on its own, without a flush', async () => {
    // The window opens at the first event: the void must come within it. 50 ms was red whenever the void's round trip
    // took longer (seen on a loaded machine); 1.5 s leaves room for the load CI has and still closes on its own.
    const { apiKey, receiver } = await merchantWithReceiver(undefined, {
      webhook_reorder: true,
      webhook_delay_ms: 1_500,
    });
    const { body } = await call(sim, 'POST', '/v1/payments', {
      apiKey,
      key: newKey(),
      body: createBody({ capture: 'manual' }),
    });
    await call(sim, 'POST', `/v1/payments/${String(body.id)}/void`, { apiKey, key: newKey() });
    await waitFor('both events', () => receiver.received.length === 2);
    expect(receiver.received.map((r) => r.event.type)).toEqual(['payment.voided', 'payment.authorized']);
  });

  it('never blocks the API answer on a receiver that hangs, and close() cancels delivery and retries', async () => {
    const hanging = http.createServer(() => undefined); // accepts and never answers
    await new Promise<void>((resolve) => hanging.listen(0, '127.0.0.1', resolve));
    const own = await startSimulator({ port: 0, webhookRetry: { attempts: 5, baseDelayMs: 60_000 } });
    try {
      const apiKey = newApiKey();
      const url = `http://127.0.0.1:${(hanging.address() as AddressInfo).port}/`;
      await own.setMerchant(apiKey, { webhook_url: url, webhook_secret: SECRET });
      const res = await call(own, 'POST', '/v1/payments', { apiKey, key: newKey(), body: createBody() });
      expect(res.status).toBe(200);
      // Answered while the delivery is still in flight: the receiver never answers, and no attempt has ended (an
      // answer that waited for it would come after the attempt's timeout, with that attempt logged).
      expect(own.webhookDeliveries()).toEqual([]);
      await waitFor('the receiver to get the connection', async () => {
        const n = await new Promise<number>((resolve) => hanging.getConnections((_e, c) => resolve(c)));
        return n > 0;
      });
    } finally {
      await own.close();
      hanging.closeAllConnections();
      await new Promise<void>((resolve) => hanging.close(() => resolve()));
    }
    // close() aborted the hanging attempt (it did not wait for the attempt's timeout) and cancelled the four retries.
    const attempts = own.webhookDeliveries();
    expect(attempts.map((d) => [d.attempt, d.status])).toEqual([[1, null]]);
    expect(attempts[0]?.error).toMatch(/abort/i);
  });

  it('refuses a webhook_url without a secret', async () => {
    const res = await call(sim, 'PUT', `/_sim/merchants/${newApiKey()}`, {
      body: { idempotency: true, key_ttl_s: 60, webhook_url: 'http://127.0.0.1:1/' },
    });
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ error: { param: 'webhook_secret' } });
  });
});
