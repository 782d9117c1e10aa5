/**
 * `handOverPaymentNews` (src/activities/handoffs.ts) over the real parts it hands to: this file's PostgreSQL database
 * (the merchant event queue, the key-record table) and the run's dev server (the merchant's delivery workflow woken).
 * Each part is tried even when the other fails; any failure fails the activity so Temporal retries it; a retry doubles
 * nothing.
 */
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { DefaultLogger } from '@temporalio/worker';
import { MockActivityEnvironment, type TestWorkflowEnvironment } from '@temporalio/testing';
import pino from 'pino';
import { type PaymentNews, createHandoffActivities } from '../../src/activities/handoffs';
import { createKeyRecordActivities } from '../../src/activities/key-records';
import type { KeyAnswer } from '../../src/domain/key-records';
import type { PaymentEventAnnouncement } from '../../src/domain/merchant-events';
import type { PaymentView } from '../../src/domain/payment';
import { KeyRecords } from '../../src/key-records';
import {
  MerchantEventOutbox,
  WebhookEndpoints,
  createMerchantWebhookActivities,
  defaultMerchantWebhookSettings,
} from '../../src/merchant-webhooks';
import { openTestDatabase } from '../helpers/database';
import { connectDevServer } from '../helpers/servers';

let env: TestWorkflowEnvironment;
let db: Awaited<ReturnType<typeof openTestDatabase>>;
/** Nothing listens on port 1: every statement over this pool is refused before it is sent. */
const unreachable = new pg.Pool({ connectionString: 'postgres://postgres@127.0.0.1:1/payments' });

beforeAll(async () => {
  env = await connectDevServer();
  db = await openTestDatabase();
});
afterAll(async () => {
  await unreachable.end();
  await db?.drop();
  await env?.teardown();
});

/** The activity over the given pools: the event queue's and the key-record table's. */
function activity(pools: { readonly events: pg.Pool; readonly keys: pg.Pool }) {
  const { announcePaymentEvent } = createMerchantWebhookActivities({
    outbox: new MerchantEventOutbox(pools.events),
    client: env.client,
    settings: defaultMerchantWebhookSettings,
    logger: pino({ level: 'silent' }),
  });
  return createHandoffActivities({ announcePaymentEvent, ...createKeyRecordActivities(new KeyRecords(pools.keys)) })
    .handOverPaymentNews;
}

const run = (attempt: number, fn: ReturnType<typeof activity>, news: PaymentNews) =>
  new MockActivityEnvironment(
    { attempt, taskQueue: `handoffs-${randomUUID().slice(0, 8)}` },
    { logger: new DefaultLogger('ERROR') },
  ).run(fn, news);

/** A status change's news for a merchant with an endpoint: one event, the charge key's first answer. */
async function news(): Promise<PaymentNews> {
  const merchantId = `m_${randomUUID().slice(0, 8)}`;
  await new WebhookEndpoints(db.pool).put(merchantId, 'https://merchant.example/hooks');
  const key = `key_${randomUUID()}`;
  const view = { key, merchantId, status: 'succeeded' } as unknown as PaymentView;
  const event: PaymentEventAnnouncement = {
    merchantId,
    announcedAtMs: Date.now(),
    event: {
      id: `evt_${randomUUID().replace(/-/g, '')}`,
      type: 'payment.succeeded',
      created: 0,
      data: { payment: view },
    },
  };
  const answer: KeyAnswer = { merchantId, operation: 'charge', key, fingerprint: 'fp', view };
  return { events: [event], keyAnswers: [answer] };
}

const eventRows = async (n: PaymentNews) =>
  (await db.pool.query('SELECT 1 FROM merchant_webhook_events WHERE id = $1', [n.events[0]?.event.id])).rowCount;
const keyRows = async (n: PaymentNews) =>
  (
    await db.pool.query('SELECT 1 FROM key_records WHERE scope = $1', [
      `charge:${n.events[0]?.merchantId}:${n.keyAnswers[0]?.key}`,
    ])
  ).rowCount;

it('hands both over and answers what each did', async () => {
  const n = await news();
  await expect(run(1, activity({ events: db.pool, keys: db.pool }), n)).resolves.toEqual({
    events: ['queued'],
    keyAnswers: ['recorded'],
  });
  expect([await eventRows(n), await keyRows(n)]).toEqual([1, 1]);
});

it('the key-record table unreachable: the event is queued anyway, the activity fails; its retry doubles nothing', async () => {
  const n = await news();
  await expect(run(1, activity({ events: db.pool, keys: unreachable }), n)).rejects.toThrow(
    /payment news not all handed over: the charge key's answer: .*ECONNREFUSED/,
  );
  expect([await eventRows(n), await keyRows(n)]).toEqual([1, 0]);
  // Temporal's retry, the table back: the key recorded, the event still once.
  await expect(run(2, activity({ events: db.pool, keys: db.pool }), n)).resolves.toEqual({
    events: ['queued'],
    keyAnswers: ['recorded'],
  });
  expect([await eventRows(n), await keyRows(n)]).toEqual([1, 1]);
});

it('the event queue unreachable: the key is recorded anyway, the activity fails naming the event', async () => {
  const n = await news();
  await expect(run(1, activity({ events: unreachable, keys: db.pool }), n)).rejects.toThrow(
    `payment news not all handed over: event ${n.events[0]?.event.id}`,
  );
  expect([await eventRows(n), await keyRows(n)]).toEqual([0, 1]);
  await run(2, activity({ events: db.pool, keys: db.pool }), n);
  expect([await eventRows(n), await keyRows(n)]).toEqual([1, 1]);
});
