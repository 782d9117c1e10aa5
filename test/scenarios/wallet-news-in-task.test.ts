/**
 * A wallet-only payment's news in its first task (patch `wallet-news-in-task`, src/workflows/payment-news.ts): the
 * ledger's debit decides the payment, and what that decision makes (the `payment.succeeded` or `payment.declined`
 * event, the key's first answer) is handed over by a local activity inside the same task: no activity, no second task.
 * That is safe only because any retry of the task hands the same over; the adversary here kills the worker right after
 * the handoff committed, before the task completed, and compares what landed with what the retry decided and with what
 * the API answered. Through the real stack: PostgreSQL, the dev server, the API over HTTP, a worker process, a webhook
 * endpoint.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { temporal } from '@temporalio/proto';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker } from '@temporalio/worker';
import type { Pool } from 'pg';
import { defaultPayloadConverter } from '@temporalio/common';
import { chargeWorkflowId } from '../../src/domain/ids';
import { KeyRecords } from '../../src/key-records';
import { MerchantEventOutbox, WebhookEndpoints, defaultMerchantWebhookSettings } from '../../src/merchant-webhooks';
import { type DebitResult, type HoldArgs, WalletLedger } from '../../src/wallets';
import { workflowBundle } from '../helpers/payments';
import { openTestDatabase } from '../helpers/database';
import { eventually } from '../helpers/eventually';
import { DEV_SERVER_ADDRESS_ENV, connectDevServer } from '../helpers/servers';
import { type WebhookReceiver, startWebhookReceiver } from '../helpers/webhook-receiver';
import { NEVER_OPENING_BREAKER, spawnWorkerProcess } from '../helpers/worker-process';
import { workflowBundlePath } from '../helpers/workflow-bundle';
import { inLocalActivity } from '../helpers/local-activity';
import { HISTORIES_DIR, localActivityTypeOf, recordHistories } from '../helpers/workflows';
import { type ApiWorld, chargeBody, fundedWallet, newKey, startWorld } from '../helpers/world';

const settings = { ...defaultMerchantWebhookSettings, backoff: { initialMs: 400, maxMs: 2_000 } };

let env: TestWorkflowEnvironment;
let receiver: WebhookReceiver;
const opened: { drop(): Promise<void> }[] = [];
const worlds: ApiWorld[] = [];

beforeAll(async () => {
  env = await connectDevServer();
  receiver = await startWebhookReceiver();
});
afterAll(async () => {
  for (const w of worlds) await w.close();
  for (const db of opened) await db.drop();
  await receiver?.close();
  await env?.teardown();
});

/** A world with everything `npm start` has on (wallets, key records, merchant webhooks) on a database of its own. */
async function newWorld(workers: boolean, ledger = (pool: Pool) => new WalletLedger(pool)) {
  const db = await openTestDatabase();
  opened.push(db);
  const h = await startWorld(env, {
    api: true,
    workers,
    wallets: ledger(db.pool),
    keyRecords: new KeyRecords(db.pool),
    merchantWebhooks: {
      outbox: new MerchantEventOutbox(db.pool),
      endpoints: new WebhookEndpoints(db.pool),
      settings,
      slots: 2,
    },
  });
  worlds.push(h);
  expect((await h.request('PUT', '/v1/webhook-endpoint', { body: { url: receiver.url } })).status).toBe(200);
  return { h, db };
}

const walletOnly = (walletId: string, amount = 1_000) =>
  chargeBody({ amount: { value: amount, currency: 'EUR' }, wallet: { walletId, amount } });

/** What landed for a payment key: its key record's view, its queued events (id, type, the view they carry). */
async function landed(db: Awaited<ReturnType<typeof openTestDatabase>>, merchantId: string, key: string) {
  const records = await db.pool.query<{ view: unknown }>('SELECT view FROM key_records WHERE scope = $1', [
    chargeWorkflowId(merchantId, key),
  ]);
  const events = await db.pool.query<{ id: string; type: string; body: string }>(
    'SELECT id, type, body FROM merchant_webhook_events WHERE payment_key = $1 ORDER BY id',
    [key],
  );
  return {
    record: records.rows.map((r) => r.view),
    events: events.rows.map((r) => ({
      id: r.id,
      type: r.type,
      payment: (JSON.parse(r.body) as { data: { payment: unknown } }).data.payment,
    })),
  };
}

/** The payment's history: the handoffs it scheduled as activities or made as local activities, and its task ends. */
async function historyOf(workflowId: string) {
  const events = (await env.client.workflow.getHandle(workflowId).fetchHistory()).events ?? [];
  // Each marker in order: a patch's id, or a local activity's type.
  const markers = events.flatMap((e): { kind: 'patch' | 'local'; name: string }[] => {
    const marker = e.markerRecordedEventAttributes;
    const patch = marker?.markerName === 'core_patch' ? marker.details?.['patch-data']?.payloads?.[0] : undefined;
    if (patch) return [{ kind: 'patch', name: defaultPayloadConverter.fromPayload<{ id: string }>(patch).id }];
    const local = localActivityTypeOf(e);
    return local ? [{ kind: 'local', name: local }] : [];
  });
  return {
    markers: markers.map((m) => m.name),
    activities: events.flatMap((e) => e.activityTaskScheduledEventAttributes?.activityType?.name ?? []),
    localActivities: markers.filter((m) => m.kind === 'local').map((m) => m.name),
    tasksCompleted: events.filter((e) => e.workflowTaskCompletedEventAttributes).length,
    tasksTimedOut: events.filter((e) => e.workflowTaskTimedOutEventAttributes).length,
  };
}

it('a wallet-only payment hands its decided news over inside its first task: no activity, no second task', async () => {
  const { h, db } = await newWorld(true);
  const walletId = await fundedWallet(h, 1_500);
  const paid = newKey();
  const short = newKey();
  const succeeded = await h.request('POST', '/v1/payments', { key: paid, body: walletOnly(walletId) });
  expect(succeeded.body).toMatchObject({ status: 'succeeded', wallet: { status: 'captured' } });
  const declined = await h.request('POST', '/v1/payments', { key: short, body: walletOnly(walletId) });
  expect(declined.body).toMatchObject({ status: 'declined', declineCode: 'wallet_insufficient_funds' });

  for (const [key, answer, type] of [
    [paid, succeeded.body, 'payment.succeeded'],
    [short, declined.body, 'payment.declined'],
  ] as const) {
    const got = await eventually(
      `${type}: its key recorded and its event queued`,
      async () => {
        const l = await landed(db, h.a.id, key);
        return l.record.length === 1 && l.events.length === 1 && l.events[0]?.type === type ? l : undefined;
      },
      20_000,
    );
    // What landed is what the client was answered.
    expect(got.record[0]).toEqual(answer);
    expect(got.events[0]?.payment).toEqual(answer);
    // The task completes once its handoff answered, a moment after what the handoff wrote is readable.
    const history = await eventually(
      'the first task completed',
      async () => {
        const x = await historyOf(chargeWorkflowId(h.a.id, key));
        return x.tasksCompleted >= 1 && x;
      },
      10_000,
    );
    expect(history.activities).toEqual([]);
    expect(history.localActivities).toEqual(['debitWallet', 'handOverPaymentNews']);
    expect(history.tasksCompleted).toBe(1);
    // The patch is asked before the debit: its marker comes first, so a replay knows it wherever the debit's answer
    // lands (the next test).
    expect(history.markers.indexOf('wallet-news-in-task')).toBeLessThan(history.markers.indexOf('debitWallet'));
  }
  await eventually(
    'both events delivered',
    async () =>
      receiver.deliveries.filter((d) => [paid, short].includes(d.event.data.payment.key as string)).length === 2,
    20_000,
  );
  await recordHistories({ env }, 'wallet-news-in-task', [
    chargeWorkflowId(h.a.id, paid),
    chargeWorkflowId(h.a.id, short),
  ]);
}, 90_000);

it('a worker killed after its task handed the news over, before the task completed: the retry hands the same over', async () => {
  const { h, db } = await newWorld(false);
  const walletId = await fundedWallet(h, 5_000);
  const doomed = await spawnWorkerProcess({
    temporalAddress: process.env[DEV_SERVER_ADDRESS_ENV] ?? '',
    taskQueue: h.taskQueue,
    workflowBundlePath: await workflowBundlePath(),
    simulatorUrl: h.sim.url,
    apiKey: h.apiKey,
    breaker: NEVER_OPENING_BREAKER,
    walletsDatabaseUrl: db.url,
    keyRecords: true,
    merchantWebhooks: { databaseUrl: db.url, settings },
    dieAfterNewsInTask: true,
  });
  try {
    const key = newKey();
    const workflowId = chargeWorkflowId(h.a.id, key);
    // The API debits and answers at once; the worker's first task reads the debit back and hands its news over.
    const answered = await h.request('POST', '/v1/payments', { key, body: walletOnly(walletId) });
    expect(answered.body).toMatchObject({ status: 'succeeded', wallet: { status: 'captured' } });
    expect(await doomed.died()).toBe('SIGKILL');
    const first = await landed(db, h.a.id, key);
    expect(first.record).toEqual([answered.body]);
    expect(first.events.map((e) => e.type)).toEqual(['payment.succeeded']);
    // Nothing of that task is in the history: the handoff ran before its task was recorded.
    expect((await historyOf(workflowId)).tasksCompleted).toBe(0);

    // The next worker gets the task once the dead one's attempt timed out, decides again, hands over again.
    await h.startWorkers();
    const history = await eventually(
      'the first task completed by the next worker',
      async () => {
        const x = await historyOf(workflowId);
        return x.tasksCompleted >= 1 && x;
      },
      60_000,
    );
    expect(history.tasksTimedOut).toBeGreaterThanOrEqual(1);
    expect(history.activities).toEqual([]);
    expect(history.localActivities).toEqual(['debitWallet', 'handOverPaymentNews']);

    // What the retry decided is what the dead try handed over and what the client got: one record, one event (the
    // same id: the run's seeded random source), one debit of the wallet.
    const view = await h.request('GET', `/v1/payments/${key}`);
    expect(view.body).toEqual(answered.body);
    const after = await landed(db, h.a.id, key);
    expect(after).toEqual(first);
    const wallet = (await h.request('GET', `/v1/wallets/${walletId}`)).body;
    expect(wallet).toMatchObject({ balance: 4_000, held: 0 });
    const entries = (await h.request('GET', `/v1/wallets/${walletId}/entries`)).body.entries as { kind: string }[];
    expect(entries.map((e) => e.kind)).toEqual(['credit', 'hold', 'capture']);
  } finally {
    await doomed.kill().catch(() => undefined);
  }
}, 120_000);

/** A ledger whose debits from a workflow's local activity answer only after `delayMs` (the API's are the real ones). */
class SlowTaskDebits extends WalletLedger {
  constructor(
    pool: Pool,
    private readonly delayMs: number,
  ) {
    super(pool);
  }
  override async debit(args: HoldArgs): Promise<DebitResult> {
    const result = await super.debit(args);
    if (inLocalActivity()) await new Promise((resolve) => setTimeout(resolve, this.delayMs));
    return result;
  }
}

it('a debit that outlasts its workflow task (the task heartbeats) replays: the patch is decided before the debit', async () => {
  // 9 s: past 80 % of the 10 s workflow task timeout, so the worker completes the task while the debit is out and its
  // answer comes in the next task. A replay then resolves the debit's local activity from its marker in the first
  // task's activation: a patch decided after the debit would be asked there, before its marker's task is replayed.
  const { h, db } = await newWorld(true, (pool) => new SlowTaskDebits(pool, 9_000));
  const walletId = await fundedWallet(h, 5_000);
  const key = newKey();
  const workflowId = chargeWorkflowId(h.a.id, key);
  const answered = await h.request('POST', '/v1/payments', { key, body: walletOnly(walletId) });
  expect(answered.body).toMatchObject({ status: 'succeeded' });
  const got = await eventually(
    'its key recorded and its event queued',
    async () => {
      const l = await landed(db, h.a.id, key);
      return l.record.length === 1 && l.events.length === 1 ? l : undefined;
    },
    30_000,
  );
  expect(got.record[0]).toEqual(answered.body);
  const history = await eventually(
    'the debit answered in a later task than the one that sent it',
    async () => {
      const x = await historyOf(workflowId);
      return x.tasksCompleted >= 2 && x.localActivities.includes('handOverPaymentNews') ? x : undefined;
    },
    30_000,
  );
  expect(history.activities).toEqual([]);
  const recorded = await env.client.workflow.getHandle(workflowId).fetchHistory();
  await expect(
    Worker.runReplayHistory({ workflowBundle: await workflowBundle() }, recorded, workflowId),
  ).resolves.toBeUndefined();
  await recordHistories({ env }, 'wallet-news-in-task-debit-past-task', [workflowId]);
}, 90_000);

it('a history whose debit answered in the task after the one that recorded it replays', async () => {
  // The cluster soak's shape (a worker just restarted, its first task slow): the debit's marker is in the first task,
  // the workflow saw its answer in the next one (forced by the completion), and took the news there. A replay resolves
  // the debit in the first task's activation: the run's patch must already be known there (asked before the debit).
  const file = path.join(HISTORIES_DIR, 'wallet-news-in-task-debit-answered-next-task.0.json');
  const history = temporal.api.history.v1.History.fromObject(JSON.parse(readFileSync(file, 'utf8')));
  const tasks = (history.events ?? []).filter((e) => e.workflowTaskCompletedEventAttributes).length;
  expect(tasks).toBe(2);
  await expect(Worker.runReplayHistory({ workflowBundle: await workflowBundle() }, history)).resolves.toBeUndefined();
});
