/**
 * A merchant webhook survives the death of the worker delivering it: a worker process (test/helpers/worker-process.ts)
 * is SIGKILLed while its POST is at the merchant's endpoint; the next worker delivers the same event (same id, signed
 * again), once the dead round's lease has passed.
 */
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import {
  MerchantEventOutbox,
  WebhookEndpoints,
  defaultMerchantWebhookSettings,
  signatureHeader,
  verifyEventSignature,
} from '../../src/merchant-webhooks';
import { openTestDatabase } from '../helpers/database';
import { workflowBundlePath } from '../helpers/workflow-bundle';
import { DEV_SERVER_ADDRESS_ENV, connectDevServer } from '../helpers/servers';
import { type WebhookReceiver, startWebhookReceiver } from '../helpers/webhook-receiver';
import { NEVER_OPENING_BREAKER, spawnWorkerProcess } from '../helpers/worker-process';
import { type ApiWorld, chargeBody, newKey, startWorld } from '../helpers/world';
import { eventually } from '../helpers/eventually';

const settings = {
  ...defaultMerchantWebhookSettings,
  attemptTimeoutMs: 3_000,
  backoff: { initialMs: 400, maxMs: 2_000 },
  retryForMs: 120_000,
  roundBudgetMs: 5_000,
};

let env: TestWorkflowEnvironment;
let db: Awaited<ReturnType<typeof openTestDatabase>>;
let h: ApiWorld;
let receiver: WebhookReceiver;

beforeAll(async () => {
  env = await connectDevServer();
  db = await openTestDatabase();
  receiver = await startWebhookReceiver();
  // This process's workers start only after the other process died.
  h = await startWorld(env, {
    api: true,
    workers: false,
    merchantWebhooks: {
      outbox: new MerchantEventOutbox(db.pool),
      endpoints: new WebhookEndpoints(db.pool),
      settings,
    },
  });
});
afterAll(async () => {
  await h?.close();
  await receiver?.close();
  await db?.drop();
  await env?.teardown();
});

it('a worker SIGKILLed while its POST is at the endpoint: the next worker delivers the same event', async () => {
  const bundlePath = await workflowBundlePath();
  const doomed = await spawnWorkerProcess({
    temporalAddress: process.env[DEV_SERVER_ADDRESS_ENV] ?? '',
    taskQueue: h.taskQueue,
    workflowBundlePath: bundlePath,
    simulatorUrl: h.sim.url,
    apiKey: h.apiKey,
    breaker: NEVER_OPENING_BREAKER,
    merchantWebhooks: { databaseUrl: db.url, settings },
  });
  try {
    const put = await h.request('PUT', '/v1/webhook-endpoint', { body: { url: receiver.url } });
    const secret = put.body.secret as string;
    // The first delivery is held open: the worker that sent it dies with it in flight.
    receiver.answer((n) => (n === 0 ? { status: 200, until: new Promise<void>(() => undefined) } : { status: 200 }));
    const key = newKey();
    const charged = await h.request('POST', '/v1/payments', { key, body: chargeBody() });
    expect(charged.body.status).toBe('succeeded');
    await eventually('the first delivery at the endpoint', async () => receiver.deliveries.length === 1, 30_000);
    await doomed.kill();

    await h.startWorkers();
    await eventually(
      'the event delivered by the next worker',
      async () => {
        const { rows } = await db.pool.query('SELECT status FROM merchant_webhook_events WHERE payment_key = $1', [
          key,
        ]);
        return rows[0]?.status === 'delivered';
      },
      60_000,
    );
    const deliveries = receiver.deliveries;
    expect(deliveries.length).toBeGreaterThanOrEqual(2);
    expect(new Set(deliveries.map((d) => d.event.id)).size).toBe(1);
    expect(deliveries[0]?.event).toMatchObject({ type: 'payment.succeeded', data: { payment: { key } } });
    for (const d of deliveries) {
      expect(verifyEventSignature(d.headers[signatureHeader.toLowerCase()] as string, d.body, secret)).toBe(true);
    }
  } finally {
    await doomed.kill().catch(() => undefined);
  }
}, 120_000);
