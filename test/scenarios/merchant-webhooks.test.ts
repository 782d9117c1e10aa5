/**
 * Webhooks to the merchant (docs/http-api.md, "Webhooks to your endpoint") end to end: `/v1/webhook-endpoint` over HTTP, payments that announce
 * their status changes and refunds, the per-merchant delivery workflow on its own task queue, and real HTTP endpoints
 * (test/helpers/webhook-receiver.ts) against the run's dev server and PostgreSQL.
 */
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { temporal } from '@temporalio/proto';
import { Registry } from 'prom-client';
import { merchantWebhookMetrics } from '../../src/metrics/merchant-webhook-metrics';
import { type MerchantEvent, merchantWebhooksWorkflowId } from '../../src/domain/merchant-events';
import { chargeWorkflowId } from '../../src/domain/ids';
import {
  MerchantEventOutbox,
  WebhookEndpoints,
  defaultMerchantWebhookSettings,
  signatureHeader,
  verifyEventSignature,
} from '../../src/merchant-webhooks';
import { openTestDatabase } from '../helpers/database';
import { connectDevServer } from '../helpers/servers';
import { type WebhookReceiver, startWebhookReceiver } from '../helpers/webhook-receiver';
import { recordHistories } from '../helpers/workflows';
import { type ApiWorld, chargeBody, newKey, startWorld } from '../helpers/world';
import { eventually } from '../helpers/eventually';

const { EventType } = temporal.api.enums.v1;

/** Compressed for real time: retries after ~0.2-0.4 s, then ~0.4-0.8 s, ... */
const settings = {
  ...defaultMerchantWebhookSettings,
  attemptTimeoutMs: 10_000,
  backoff: { initialMs: 400, maxMs: 2_000 },
  retryForMs: 120_000,
  roundBudgetMs: 5_000,
};

let env: TestWorkflowEnvironment;
let db: Awaited<ReturnType<typeof openTestDatabase>>;
let h: ApiWorld;
let outbox: MerchantEventOutbox;
const receivers: WebhookReceiver[] = [];
const registry = new Registry();
/** One sample of the workers' webhook metrics, e.g. `payments_merchant_webhook_attempts_total{outcome="delivered"}`. */
async function metric(series: string): Promise<number> {
  const line = (await registry.metrics()).split('\n').find((l) => l.startsWith(`${series} `));
  return Number(line?.split(' ')[1] ?? 0);
}

beforeAll(async () => {
  env = await connectDevServer();
  db = await openTestDatabase();
  outbox = new MerchantEventOutbox(db.pool);
  h = await startWorld(env, {
    api: true,
    merchantWebhooks: {
      outbox,
      endpoints: new WebhookEndpoints(db.pool),
      settings,
      slots: 4,
      observer: merchantWebhookMetrics(registry, () => outbox.backlog()),
    },
    timings: { refundWindowMs: 600_000 },
  });
});
afterAll(async () => {
  await h?.close();
  await Promise.all(receivers.map((r) => r.close()));
  await db?.drop();
  await env?.teardown();
});

/** A fresh endpoint, set for `token`'s merchant: answers the receiver and the secret PUT answered. */
async function endpointFor(token: string): Promise<{ receiver: WebhookReceiver; secret: string }> {
  const receiver = await startWebhookReceiver();
  receivers.push(receiver);
  const put = await h.request('PUT', '/v1/webhook-endpoint', { token, body: { url: receiver.url } });
  expect(put.status).toBe(200);
  return { receiver, secret: put.body.secret as string };
}

const eventsOf = (receiver: WebhookReceiver, key: string) =>
  receiver.deliveries.filter((d) => d.event.data.payment.key === key);

describe('/v1/webhook-endpoint', () => {
  it('PUT answers the URL and a new whsec_ secret every time; GET the URL only; DELETE 204; per merchant', async () => {
    const url = 'https://merchant.example/hooks/payments?src=pw';
    const first = await h.request('PUT', '/v1/webhook-endpoint', { token: h.b.token, body: { url } });
    const second = await h.request('PUT', '/v1/webhook-endpoint', { token: h.b.token, body: { url } });
    expect(first.status).toBe(200);
    expect(first.body).toEqual({ url, secret: expect.stringMatching(/^whsec_[A-Za-z0-9_-]{40,}$/) });
    expect(second.body.secret).not.toBe(first.body.secret);
    // Kept in PostgreSQL, in the database of the wallets (one database, one backup), with the secret the last PUT gave.
    const { rows } = await db.pool.query(
      `SELECT url, secret, to_regclass('wallets') IS NOT NULL AS beside_wallets
       FROM merchant_webhook_endpoints WHERE merchant_id = $1`,
      [h.b.id],
    );
    expect(rows).toEqual([{ url, secret: second.body.secret, beside_wallets: true }]);
    const read = await h.request('GET', '/v1/webhook-endpoint', { token: h.b.token });
    expect(read.status).toBe(200);
    expect(read.body).toEqual({ url });
    expect((await h.request('DELETE', '/v1/webhook-endpoint', { token: h.b.token })).status).toBe(204);
    expect((await h.request('GET', '/v1/webhook-endpoint', { token: h.b.token })).status).toBe(404);
    expect((await h.request('DELETE', '/v1/webhook-endpoint', { token: h.b.token })).status).toBe(204);
  });

  it.each([
    ['not a URL', { url: 'merchant.example/hooks' }],
    ['another scheme', { url: 'ftp://merchant.example/hooks' }],
    ['credentials in it', { url: 'https://user:pw@merchant.example/hooks' }],
    ['no url', {}],
    ['not a string', { url: 42 }],
  ])('a bad endpoint URL (%s) is 400 naming url, and nothing is set', async (_what, body) => {
    const answer = await h.request('PUT', '/v1/webhook-endpoint', { token: h.b.token, body });
    expect(answer.status).toBe(400);
    expect(answer.body.error?.type).toBe('validation_error');
    expect(answer.body.error?.fields?.map((f) => f.path)).toEqual(['url']);
    expect((await h.request('GET', '/v1/webhook-endpoint', { token: h.b.token })).status).toBe(404);
  });
});

describe('events', () => {
  it('a receiver that fails twice then accepts gets the event three times, one id, each validly signed; readable first', async () => {
    const { receiver, secret } = await endpointFor(h.a.token);
    receiver.answer((n) => ({ status: n < 2 ? 500 : 204 }));
    // What GET answers at the moment each delivery arrives, before it is answered.
    const readBack: unknown[] = [];
    receiver.onDelivery(async (d) => {
      readBack.push((await h.request('GET', `/v1/payments/${d.event.data.payment.key}`)).body);
    });
    const key = newKey();
    const charged = await h.request('POST', '/v1/payments', { key, body: chargeBody() });
    expect(charged.body.status).toBe('succeeded');

    const deliveries = await eventually('three deliveries', async () => {
      const got = eventsOf(receiver, key);
      return got.length >= 3 && got;
    });
    await eventually('the event delivered in the queue', async () => {
      const { rows } = await db.pool.query(
        'SELECT status, attempts FROM merchant_webhook_events WHERE payment_key = $1',
        [key],
      );
      return rows[0]?.status === 'delivered' && rows[0].attempts === 3;
    });
    expect(deliveries).toHaveLength(3);
    const [event] = deliveries.map((d) => d.event);
    expect(new Set(deliveries.map((d) => d.event.id)).size).toBe(1);
    expect(event?.id).toMatch(/^evt_[0-9a-f]{32}$/);
    expect(event).toMatchObject({ type: 'payment.succeeded', data: { payment: { key, status: 'succeeded' } } });
    expect(event?.created).toBeLessThanOrEqual(Math.ceil(Date.now() / 1000));
    for (const d of deliveries) {
      expect(verifyEventSignature(d.headers[signatureHeader.toLowerCase()] as string, d.body, secret)).toBe(true);
      expect(d.body).toBe(deliveries[0]?.body); // the same bytes every time
    }
    // The retries waited (backoff), and the event was readable when it arrived: GET showed what it announced.
    expect((deliveries[2]?.atMs ?? 0) - (deliveries[0]?.atMs ?? 0)).toBeGreaterThanOrEqual(400);
    for (const view of readBack.slice(0, 3)) {
      expect(view).toMatchObject({ key, status: 'succeeded', updatedAt: event?.data.payment.updatedAt });
    }
    // What the metrics show: two 5xx attempts, one delivery after about a second of lag.
    expect(await metric('payments_merchant_webhook_attempts_total{outcome="http_5xx"}')).toBe(2);
    expect(await metric('payments_merchant_webhook_attempts_total{outcome="delivered"}')).toBe(1);
    expect(await metric('payments_merchant_webhook_events_total{outcome="queued"}')).toBe(1);
    expect(await metric('payments_merchant_webhook_delivery_lag_seconds_count')).toBe(1);
    expect(await metric('payments_merchant_webhook_delivery_lag_seconds_bucket{le="0.25"}')).toBe(0);
  }, 60_000);

  it('an endpoint that never accepts: retried with growing waits to the end of the retry window, then given up', async () => {
    const { receiver } = await endpointFor(h.a.token);
    receiver.answer(() => ({ status: 503 }));
    const gaveUpBefore = await metric('payments_merchant_webhook_events_total{outcome="gave_up"}');
    const key = newKey();
    expect((await h.request('POST', '/v1/payments', { key, body: chargeBody() })).body.status).toBe('succeeded');
    await eventually('two attempts', async () => eventsOf(receiver, key).length >= 2);
    // As if the event had been failing for all but the last 1.5 s of its window (3 days by default).
    const { rows: moved } = await db.pool.query<{ window_end: Date }>(
      `UPDATE merchant_webhook_events SET queued_at = queued_at - ($2 || ' milliseconds')::interval
       WHERE payment_key = $1 RETURNING queued_at + ($3 || ' milliseconds')::interval AS window_end`,
      [key, String(settings.retryForMs - 1_500), String(settings.retryForMs)],
    );
    const windowEndMs = moved[0]?.window_end.getTime() ?? 0;
    const final = await eventually(
      'the event given up',
      async () => {
        const { rows } = await db.pool.query<{ status: string; attempts: number }>(
          'SELECT status, attempts FROM merchant_webhook_events WHERE payment_key = $1',
          [key],
        );
        return rows[0]?.status === 'failed' && rows[0];
      },
      30_000,
    );
    const deliveries = eventsOf(receiver, key);
    expect(deliveries).toHaveLength(final.attempts);
    expect(new Set(deliveries.map((d) => d.event.id)).size).toBe(1);
    // Each wait at least half its doubling step (0.4 s, 0.8 s, ...), the last attempt at the window's end.
    const gaps = deliveries.slice(1).map((d, i) => d.atMs - (deliveries[i]?.atMs ?? 0));
    gaps.slice(0, 2).forEach((gap, i) => expect(gap).toBeGreaterThanOrEqual((settings.backoff.initialMs << i) / 2));
    expect(deliveries.at(-1)?.atMs).toBeGreaterThanOrEqual(windowEndMs - 50);
    // Counted once the row's `failed` committed, a moment after it is visible (one full run read it in between).
    const gaveUp = () => metric('payments_merchant_webhook_events_total{outcome="gave_up"}');
    await eventually('the give-up counted', async () => (await gaveUp()) > gaveUpBefore, 5_000);
    expect(await gaveUp()).toBe(gaveUpBefore + 1);
    // Past the longest backoff step: nothing more is sent.
    await new Promise((r) => setTimeout(r, settings.backoff.maxMs + 500));
    expect(eventsOf(receiver, key)).toHaveLength(final.attempts);
  }, 60_000);

  it('a declined payment announces payment.declined with its decline code', async () => {
    const { receiver } = await endpointFor(h.a.token);
    const key = newKey();
    const declined = await h.request('POST', '/v1/payments', {
      key,
      body: chargeBody({ paymentMethod: 'pm_decline_insufficient_funds' }),
    });
    expect(declined.body).toMatchObject({ status: 'declined', declineCode: 'insufficient_funds' });
    const [event] = await eventually('payment.declined', async () => {
      const got = eventsOf(receiver, key);
      return got.length >= 1 && got.map((d) => d.event);
    });
    expect(event).toMatchObject({
      type: 'payment.declined',
      data: { payment: { key, status: 'declined', declineCode: declined.body.declineCode } },
    });
  });

  it('a manual capture, a capture and two refunds: one event per status change and per refund, ordered by updatedAt', async () => {
    const { receiver, secret } = await endpointFor(h.a.token);
    const key = newKey();
    const authorized = await h.request('POST', '/v1/payments', { key, body: chargeBody({ capture: 'manual' }) });
    expect(authorized.body.status).toBe('authorized');
    await eventually('payment.authorized', async () => eventsOf(receiver, key).length === 1);
    const captured = await h.request('POST', `/v1/payments/${key}/capture`, { key: newKey(), body: {} });
    expect(captured.body.status).toBe('succeeded');
    for (const amount of [300, 200]) {
      const refunded = await h.request('POST', `/v1/payments/${key}/refunds`, { key: newKey(), body: { amount } });
      expect(refunded.status).toBe(200);
    }
    const events = await eventually('four events', async () => {
      const got = eventsOf(receiver, key);
      return got.length >= 4 && got.map((d) => d.event);
    });
    await new Promise((r) => setTimeout(r, 1_000)); // nothing more comes
    expect(eventsOf(receiver, key)).toHaveLength(4);
    for (const d of eventsOf(receiver, key)) {
      expect(verifyEventSignature(d.headers[signatureHeader.toLowerCase()] as string, d.body, secret)).toBe(true);
    }
    // The receiver orders them by the payment's updatedAt, whatever order they arrived in.
    const ordered = [...events].sort((x, y) => x.data.payment.updatedAt.localeCompare(y.data.payment.updatedAt));
    expect(ordered.map((e) => e.type)).toEqual([
      'payment.authorized',
      'payment.succeeded',
      'payment.refunded',
      'payment.refunded',
    ]);
    expect(ordered.map((e) => e.data.payment.amountRefunded)).toEqual([0, 0, 300, 500]);
    const times = ordered.map((e) => Date.parse(e.data.payment.updatedAt));
    for (let i = 1; i < times.length; i++) expect(times[i]).toBeGreaterThan(times[i - 1] as number);
    expect(new Set(events.map((e) => e.id)).size).toBe(4);
    await recordHistories({ env }, 'merchant-events-capture-refunds', [
      chargeWorkflowId(h.a.id, key),
      merchantWebhooksWorkflowId(h.a.id),
    ]);
  }, 60_000);

  it('a merchant without an endpoint: its payments announce, nothing is queued or sent', async () => {
    const key = newKey();
    await h.request('DELETE', '/v1/webhook-endpoint', { token: h.b.token });
    const charged = await h.request('POST', '/v1/payments', { token: h.b.token, key, body: chargeBody() });
    expect(charged.body.status).toBe('succeeded');
    await eventually('the handoff answered', async () => {
      const history = await env.client.workflow.getHandle(chargeWorkflowId(h.b.id, key)).fetchHistory();
      return (history.events ?? []).some((e) => e.eventType === EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED);
    });
    const { rows } = await db.pool.query('SELECT 1 FROM merchant_webhook_events WHERE payment_key = $1', [key]);
    expect(rows).toHaveLength(0);
    expect(await metric('payments_merchant_webhook_events_total{outcome="no_endpoint"}')).toBeGreaterThanOrEqual(1);
  });

  it('a slow endpoint delays neither payments nor another merchant’s events', async () => {
    // Merchant A's endpoint does not answer (each POST waits out its 10 s bound); the webhook worker has 4 slots.
    const slow = await endpointFor(h.a.token);
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    slow.receiver.answer(() => ({ status: 200, until: released }));
    const fast = await endpointFor(h.b.token);
    const slowKeys = Array.from({ length: 12 }, () => newKey());
    const answers = await Promise.all(
      slowKeys.map((key) => h.request('POST', '/v1/payments', { key, body: chargeBody() })),
    );
    expect(answers.map((a) => a.body.status)).toEqual(slowKeys.map(() => 'succeeded'));
    await eventually('A’s first deliveries arrive', async () => slow.receiver.deliveries.length >= 1);

    const key = newKey();
    const paidAt = Date.now();
    expect((await h.request('POST', '/v1/payments', { token: h.b.token, key, body: chargeBody() })).status).toBe(200);
    const delivered = await eventually('B’s event', async () => eventsOf(fast.receiver, key)[0]);
    // Had B's round waited for a slot A's POSTs hold, it would have waited out their 10 s bound.
    expect(delivered.atMs - paidAt).toBeLessThan(5_000);
    // Every one of A's payments handed its event over while A's endpoint had answered nothing: none waits for it.
    for (const k of slowKeys) {
      const history = await env.client.workflow.getHandle(chargeWorkflowId(h.a.id, k)).fetchHistory();
      expect(history.events?.some((e) => e.eventType === EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED)).toBe(true);
    }
    // One round of A's at a time, at most its concurrency in flight.
    expect(slow.receiver.maxOpen()).toBeLessThanOrEqual(settings.concurrencyPerMerchant);
    // The backlog piles up for A alone, and shows in the metrics. The gauges read the database at scrape time through
    // a 1 s cache: a scrape within a second of the previous test's reads an older backlog (CI once read 0 here).
    await eventually('A’s backlog in the metrics', async () => {
      const pending = await metric(`payments_merchant_webhook_backlog_events{merchant="${h.a.id}"}`);
      return pending >= 8 ? pending : undefined;
    });
    expect(await metric(`payments_merchant_webhook_oldest_pending_seconds{merchant="${h.a.id}"}`)).toBeGreaterThan(0);
    expect(await metric(`payments_merchant_webhook_backlog_events{merchant="${h.b.id}"}`)).toBe(0);
    release();
    await eventually(
      'all of A’s events',
      async () => new Set(slow.receiver.deliveries.map((d) => d.event.id)).size >= slowKeys.length,
      60_000,
    );
  }, 120_000);
});

describe('cost', () => {
  it('a payment with events pays one handoff activity per event; the delivery workflow is the merchant’s', async () => {
    const { receiver } = await endpointFor(h.a.token);
    const key = newKey();
    await h.request('POST', '/v1/payments', { key, body: chargeBody() });
    await eventually('delivered', async () => eventsOf(receiver, key).length === 1);
    const history = await env.client.workflow.getHandle(chargeWorkflowId(h.a.id, key)).fetchHistory();
    const scheduled = (history.events ?? []).filter(
      (e) => e.eventType === EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED,
    );
    expect(scheduled.map((e) => e.activityTaskScheduledEventAttributes?.activityType?.name)).toEqual([
      'announcePaymentEvent',
    ]);
    const dispatcher = await env.client.workflow.getHandle(merchantWebhooksWorkflowId(h.a.id)).describe();
    expect(dispatcher.taskQueue).toBe(`${h.taskQueue}.merchant-webhooks`);
    const event = JSON.parse(receiver.deliveries[0]?.body ?? '{}') as MerchantEvent;
    expect(event.type).toBe('payment.succeeded');
  });
});
