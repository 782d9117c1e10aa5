/**
 * A payment with both handoffs on (merchant events and key records, as under `npm start`): each status change hands
 * its news over in one activity, `handOverPaymentNews`, carrying the change's event and its key's first answer,
 * against the run's dev server, PostgreSQL, the API, the simulator and a real webhook endpoint. What each handoff
 * leaves is read where it lands (the key-record table, the merchant's endpoint), and the activities from the history.
 */
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { defaultPayloadConverter } from '@temporalio/common';
import type { PaymentNews } from '../../src/activities/handoffs';
import { chargeWorkflowId } from '../../src/domain/ids';
import type { MerchantEvent } from '../../src/domain/merchant-events';
import { KeyRecords } from '../../src/key-records';
import { MerchantEventOutbox, WebhookEndpoints, defaultMerchantWebhookSettings } from '../../src/merchant-webhooks';
import { openTestDatabase } from '../helpers/database';
import { eventually } from '../helpers/eventually';
import { connectDevServer } from '../helpers/servers';
import { type WebhookReceiver, startWebhookReceiver } from '../helpers/webhook-receiver';
import { recordHistories } from '../helpers/workflows';
import { type ApiWorld, chargeBody, newKey, startWorld } from '../helpers/world';

let env: TestWorkflowEnvironment;
let db: Awaited<ReturnType<typeof openTestDatabase>>;
let h: ApiWorld;
let receiver: WebhookReceiver;

beforeAll(async () => {
  env = await connectDevServer();
  db = await openTestDatabase();
  const outbox = new MerchantEventOutbox(db.pool);
  h = await startWorld(env, {
    api: true,
    merchantWebhooks: {
      outbox,
      endpoints: new WebhookEndpoints(db.pool),
      settings: { ...defaultMerchantWebhookSettings, backoff: { initialMs: 400, maxMs: 2_000 } },
      slots: 2,
    },
    keyRecords: new KeyRecords(db.pool),
    // A short refund window: the payment closes seconds after its refund, its handoffs all in its history.
    timings: { refundWindowMs: 4_000 },
  });
  receiver = await startWebhookReceiver();
  expect(
    (await h.request('PUT', '/v1/webhook-endpoint', { token: h.a.token, body: { url: receiver.url } })).status,
  ).toBe(200);
});
afterAll(async () => {
  await h?.close();
  await receiver?.close();
  await db?.drop();
  await env?.teardown();
});

const recorded = async (scope: string) =>
  (await db.pool.query('SELECT 1 FROM key_records WHERE scope = $1', [scope])).rowCount === 1;

/** The handoff activities the charge scheduled, in order: each one's type and what it carried. */
async function handoffsOf(workflowId: string): Promise<{ type: string; events: string[]; keys: string[] }[]> {
  const history = await env.client.workflow.getHandle(workflowId).fetchHistory();
  const handoffs: { type: string; events: string[]; keys: string[] }[] = [];
  for (const e of history.events ?? []) {
    const scheduled = e.activityTaskScheduledEventAttributes;
    const type = scheduled?.activityType?.name ?? '';
    const [input] = (scheduled?.input?.payloads ?? []).map((p) => defaultPayloadConverter.fromPayload<unknown>(p));
    if (type === 'handOverPaymentNews') {
      const news = input as PaymentNews;
      handoffs.push({
        type,
        events: news.events.map((a) => a.event.type),
        keys: news.keyAnswers.map((k) => k.operation),
      });
    } else if (type === 'announcePaymentEvent') {
      handoffs.push({ type, events: [(input as { event: MerchantEvent }).event.type], keys: [] });
    } else if (type === 'recordKeyAnswer') {
      handoffs.push({ type, events: [], keys: [(input as { operation: string }).operation] });
    }
  }
  return handoffs;
}

it('a manual capture and a refund: every event delivered and every key recorded, each task’s news in one activity', async () => {
  const key = newKey();
  const captureKey = newKey();
  const refundKey = newKey();
  const authorized = await h.request('POST', '/v1/payments', { key, body: chargeBody({ capture: 'manual' }) });
  expect(authorized.body.status).toBe('authorized');
  const captured = await h.request('POST', `/v1/payments/${key}/capture`, { key: captureKey, body: {} });
  expect(captured.body.status).toBe('succeeded');
  const refunded = await h.request('POST', `/v1/payments/${key}/refunds`, { key: refundKey, body: { amount: 300 } });
  expect(refunded.status).toBe(200);

  const workflowId = chargeWorkflowId(h.a.id, key);
  await eventually(
    'the workflow closed',
    async () => (await env.client.workflow.getHandle(workflowId).describe()).status.name === 'COMPLETED',
    30_000,
  );
  // Where the handoffs land: the three keys' records, the three events at the merchant's endpoint.
  for (const scope of [workflowId, `capture:${h.a.id}:${captureKey}`, `refund:${h.a.id}:${refundKey}`]) {
    expect(await recorded(scope)).toBe(true);
  }
  const events = await eventually('three events delivered', async () => {
    const got = receiver.deliveries.filter((d) => d.event.data.payment.key === key).map((d) => d.event.type);
    return got.length >= 3 && got;
  });
  expect([...events].sort()).toEqual(['payment.authorized', 'payment.refunded', 'payment.succeeded']);

  // One activity per workflow task with news, carrying what that task made of both kinds: the first answer's event
  // and key together, the refund's too. The capture's status change and its key's answer may come a task apart (the
  // provider's answer, then the capture's own end): one activity or two, never one per item of the old histories.
  const handoffs = await handoffsOf(workflowId);
  expect(handoffs.every((x) => x.type === 'handOverPaymentNews')).toBe(true);
  expect(handoffs.flatMap((x) => x.events)).toEqual(['payment.authorized', 'payment.succeeded', 'payment.refunded']);
  expect(handoffs.flatMap((x) => x.keys)).toEqual(['charge', 'capture', 'refund']);
  expect(handoffs[0]).toEqual({ type: 'handOverPaymentNews', events: ['payment.authorized'], keys: ['charge'] });
  expect(handoffs.at(-1)).toEqual({ type: 'handOverPaymentNews', events: ['payment.refunded'], keys: ['refund'] });
  expect(handoffs.length).toBeLessThanOrEqual(4);
  await recordHistories({ env }, 'payment-news-capture-refund', [workflowId]);
}, 90_000);
