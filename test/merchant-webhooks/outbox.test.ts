/**
 * The merchants' event queue on a real PostgreSQL (this file's database): an event queued once per id, only for a
 * merchant with an endpoint; one wake per burst; claims that two rounds never share; the retry window's last attempt
 * and its end; redelivery; pruning.
 */
import { randomUUID } from 'node:crypto';
import type { MerchantEvent, PaymentEventAnnouncement } from '../../src/domain/merchant-events';
import type { PaymentView } from '../../src/domain/payment';
import { MerchantEventOutbox, WebhookEndpoints } from '../../src/merchant-webhooks';
import { openTestDatabase } from '../helpers/database';

let db: Awaited<ReturnType<typeof openTestDatabase>>;
let outbox: MerchantEventOutbox;
let endpoints: WebhookEndpoints;

beforeAll(async () => {
  db = await openTestDatabase();
  outbox = new MerchantEventOutbox(db.pool);
  endpoints = new WebhookEndpoints(db.pool);
});
afterAll(async () => {
  await db?.drop();
});

const merchant = () => `m_${randomUUID().slice(0, 8)}`;

function announcement(merchantId: string, over: Partial<MerchantEvent> = {}): PaymentEventAnnouncement {
  const payment = { key: `key_${randomUUID()}`, merchantId, status: 'succeeded' } as unknown as PaymentView;
  return {
    merchantId,
    announcedAtMs: Date.now(),
    event: {
      id: `evt_${randomUUID().replace(/-/g, '')}`,
      type: 'payment.succeeded',
      created: Math.floor(Date.now() / 1000),
      data: { payment },
      ...over,
    },
  };
}

const row = async (id: string) =>
  (
    await db.pool.query<{ status: string; attempts: number; next_attempt_at: Date; queued_at: Date }>(
      'SELECT status, attempts, next_attempt_at, queued_at FROM merchant_webhook_events WHERE id = $1',
      [id],
    )
  ).rows[0];

it('queues an event once per id, only for a merchant with an endpoint; the first of a burst wakes, the round resets', async () => {
  const m = merchant();
  const none = announcement(m);
  expect(await outbox.queue(none)).toEqual({ queued: false, wake: false });
  expect(await row(none.event.id)).toBeUndefined();

  await endpoints.put(m, 'https://merchant.example/hooks');
  const first = announcement(m);
  const second = announcement(m);
  expect(await outbox.queue(first)).toEqual({ queued: true, wake: true });
  expect(await outbox.queue(first)).toEqual({ queued: true, wake: false }); // a repeat: nothing new
  expect(await outbox.queue(second)).toEqual({ queued: true, wake: false }); // a wake is on its way
  expect(await outbox.startRound(m)).toBe(true); // it has an endpoint
  expect(await outbox.queue(announcement(m))).toEqual({ queued: true, wake: true });
  const { rows } = await db.pool.query('SELECT id, body FROM merchant_webhook_events WHERE merchant_id = $1', [m]);
  expect(rows).toHaveLength(3);
  expect(JSON.parse(rows.find((r: { id: string }) => r.id === first.event.id).body)).toEqual(first.event);
});

it('two rounds claiming at once never get the same event; a lease keeps it until it passes', async () => {
  const m = merchant();
  await endpoints.put(m, 'https://merchant.example/hooks');
  const events = Array.from({ length: 6 }, () => announcement(m));
  for (const a of events) await outbox.queue(a);
  const claims = await Promise.all(Array.from({ length: 10 }, (_, i) => outbox.claim(m, 60_000, i % 2 === 0 ? 1 : 2)));
  const claimed = claims.flat().map((c) => c.id);
  expect(claimed.sort()).toEqual(events.map((a) => a.event.id).sort());
  expect(await outbox.claim(m, 60_000, 4)).toEqual([]);
  // The earliest one due again: the leases (a minute) count.
  expect(await outbox.nextDueInMs(m)).toBeGreaterThan(50_000);
  expect(claims.flat()[0]).toMatchObject({ url: 'https://merchant.example/hooks' });
});

it('a failed attempt is due after its delay, the last one at the end of the window, then the event is failed', async () => {
  const m = merchant();
  await endpoints.put(m, 'https://merchant.example/hooks');
  const a = announcement(m);
  await outbox.queue(a);
  const [claimed] = await outbox.claim(m, 10_000);
  expect(claimed?.id).toBe(a.event.id);
  // A delay past the window: the next attempt falls exactly at its end.
  expect(await outbox.recordFailed(a.event.id, { error: 'timeout' }, 60_000, 1_500)).toBe('pending');
  const pending = await row(a.event.id);
  expect(pending?.attempts).toBe(1);
  expect((pending?.next_attempt_at.getTime() ?? 0) - (pending?.queued_at.getTime() ?? 0)).toBe(1_500);
  await new Promise((r) => setTimeout(r, 1_600));
  expect((await outbox.claim(m, 10_000))[0]?.id).toBe(a.event.id);
  expect(await outbox.recordFailed(a.event.id, { status: 503, error: 'HTTP 503' }, 60_000, 1_500)).toBe('failed');
  expect(await row(a.event.id)).toMatchObject({ status: 'failed', attempts: 2 });
  expect(await outbox.nextDueInMs(m)).toBeUndefined();
  expect((await outbox.backlog()).find((b) => b.merchantId === m)).toBeUndefined();

  // Redelivered by an operator: pending, due now, a fresh window; then delivered.
  expect(await outbox.redeliver({ merchantId: m })).toBe(1);
  expect(await row(a.event.id)).toMatchObject({ status: 'pending', attempts: 2 });
  expect((await outbox.backlog()).find((b) => b.merchantId === m)).toMatchObject({ pending: 1 });
  expect((await outbox.claim(m, 10_000))[0]?.id).toBe(a.event.id);
  await outbox.recordDelivered(a.event.id, 204);
  expect(await row(a.event.id)).toMatchObject({ status: 'delivered', attempts: 3 });
  expect(await outbox.redeliver({ merchantId: m })).toBe(0); // delivered events only when asked for
  expect(await outbox.redeliver({ merchantId: m, statuses: ['delivered'] })).toBe(1);
});

it('an endpoint removed: pending events are discarded; settled events are pruned after the retention', async () => {
  const m = merchant();
  await endpoints.put(m, 'https://merchant.example/hooks');
  const a = announcement(m);
  await outbox.queue(a);
  await endpoints.delete(m);
  expect(await outbox.startRound(m)).toBe(false);
  expect(await outbox.discardPending(m)).toBe(1);
  expect(await row(a.event.id)).toMatchObject({ status: 'discarded' });
  expect(await outbox.prune(new Date(Date.now() - 60_000))).toBe(0);
  expect(await outbox.prune(new Date(Date.now() + 60_000))).toBeGreaterThanOrEqual(1);
  expect(await row(a.event.id)).toBeUndefined();
});
