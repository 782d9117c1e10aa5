/**
 * A split payment's first step (patch `wallet-split-first-step`, src/activities/wallet-first-step.ts): the hold, the
 * card part's local first attempt and the hold's settlement are one local activity of the first workflow task. Its
 * adversary here is a worker that dies inside it: after the hold committed, after the provider answered the create,
 * after the settlement committed. Nothing of the step is in the history then; the next worker runs the task again,
 * and every step must read back what the dead one did: one hold, one create at the provider, one settlement, and the
 * answer the ledger and the provider hold. Through the real stack: PostgreSQL, the dev server, the API over HTTP, a
 * worker process that dies, then the test's workers.
 */
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import type { Pool } from 'pg';
import { chargeWorkflowId } from '../../src/domain/ids';
import { type SettleArgs, type SettleResult, WalletLedger } from '../../src/wallets';
import { openTestDatabase } from '../helpers/database';
import { eventually } from '../helpers/eventually';
import { DEV_SERVER_ADDRESS_ENV, connectDevServer } from '../helpers/servers';
import { NEVER_OPENING_BREAKER, type WorkerProcessSpec, spawnWorkerProcess } from '../helpers/worker-process';
import { workflowBundlePath } from '../helpers/workflow-bundle';
import { localActivityTypeOf, recordHistories } from '../helpers/workflows';
import { inLocalActivity } from '../helpers/local-activity';
import { type ApiWorld, chargeBody, fundedWallet, newKey, startWorld } from '../helpers/world';

let env: TestWorkflowEnvironment;
const opened: { drop(): Promise<void> }[] = [];
const worlds: ApiWorld[] = [];

beforeAll(async () => {
  env = await connectDevServer();
});
afterAll(async () => {
  for (const w of worlds) await w.close();
  for (const db of opened) await db.drop();
  await env?.teardown();
});

/** The local activities of a payment's history, by type, and how many of its workflow tasks timed out. */
async function historyOf(workflowId: string) {
  const events = (await env.client.workflow.getHandle(workflowId).fetchHistory()).events ?? [];
  return {
    localActivities: events.flatMap((e) => localActivityTypeOf(e) ?? []),
    activities: events.flatMap((e) => e.activityTaskScheduledEventAttributes?.activityType?.name ?? []),
    tasksTimedOut: events.filter((e) => e.workflowTaskTimedOutEventAttributes).length,
  };
}

it.each([
  ['after-hold', 'pm_card_visa', 'succeeded', 'capture'],
  ['after-create', 'pm_card_visa', 'succeeded', 'capture'],
  ['after-create', 'pm_decline_card', 'declined', 'release'],
  ['after-settle', 'pm_card_visa', 'succeeded', 'capture'],
] as const)(
  'a worker killed inside the split payment’s first step (%s, %s): the next one reads every step back, nothing twice',
  async (point, paymentMethod, status, settlement) => {
    const db = await openTestDatabase();
    opened.push(db);
    const h = await startWorld(env, { api: true, workers: false, wallets: new WalletLedger(db.pool) });
    worlds.push(h);
    const walletId = await fundedWallet(h, 1_000);
    const spec: WorkerProcessSpec = {
      temporalAddress: process.env[DEV_SERVER_ADDRESS_ENV] ?? '',
      taskQueue: h.taskQueue,
      workflowBundlePath: await workflowBundlePath(),
      simulatorUrl: h.sim.url,
      apiKey: h.apiKey,
      breaker: NEVER_OPENING_BREAKER,
      walletsDatabaseUrl: db.url,
      dieInFirstStep: point,
    };
    const doomed = await spawnWorkerProcess(spec);
    try {
      const key = newKey();
      const workflowId = chargeWorkflowId(h.a.id, key);
      const body = chargeBody({
        amount: { value: 1_000, currency: 'EUR' },
        paymentMethod,
        wallet: { walletId, amount: 400 },
      });
      const orderId = body.orderId as string;
      // The API waits for the first answer, which the dying worker never gives: 202 once its own deadline passed.
      const answered = h.request('POST', '/v1/payments', { key, body });
      expect(await doomed.died()).toBe('SIGKILL');
      // What the dead step did is in the ledger (and at the provider), none of it in the history.
      const kindsBefore = (await entriesOf(h, walletId)).map((e) => e.kind);
      expect(kindsBefore).toEqual(point === 'after-settle' ? ['credit', 'hold', settlement] : ['credit', 'hold']);
      expect((await historyOf(workflowId)).localActivities).toEqual([]);

      await h.startWorkers();
      const first = await answered;
      expect([200, 202]).toContain(first.status);
      const settled = await eventually(
        'the payment settled by the next worker',
        async () => {
          const v = (await h.request('GET', `/v1/payments/${key}`)).body;
          return v.status === status && (v.wallet as { status?: string } | undefined)?.status !== 'held'
            ? v
            : undefined;
        },
        60_000,
      );
      expect(settled.wallet).toMatchObject({ amount: 400, status: settlement === 'capture' ? 'captured' : 'released' });
      // The next worker ran the first task again: its first step read the hold back and the provider answered the
      // create's key as before; the settlement was made (or read back) once.
      const history = await historyOf(workflowId);
      expect(history.tasksTimedOut).toBeGreaterThanOrEqual(1);
      expect(history.localActivities[0]).toBe('firstCreateAttempt');
      expect(history.activities.filter((a) => a.includes('Wallet'))).toEqual([]);
      const entries = await entriesOf(h, walletId);
      expect(entries.map((e) => [e.kind, e.amount])).toEqual([
        ['credit', 1_000],
        ['hold', 400],
        [settlement, 400],
      ]);
      // The view carries the ledger's time of the settlement, as the first try would have.
      expect(settled.updatedAt).toBe(entries[2]?.at);
      const wallet = (await h.request('GET', `/v1/wallets/${walletId}`)).body;
      expect(wallet).toMatchObject({ balance: settlement === 'capture' ? 600 : 1_000, held: 0 });
      // At the provider: the card part only, created once (a decline holds no money).
      const ledger = h.ledger();
      expect(ledger.effects.filter((e) => e.reference === orderId).map((e) => [e.operation, e.amount])).toEqual(
        status === 'succeeded' ? [['create', 600]] : [],
      );
      // The retried first task counts the dead try's attempt as possibly sent (it cannot know whether it left), and its
      // own: two, whichever point the worker died at.
      expect(settled.attempts).toBe(2);
      await recordHistories({ env }, `wallet-split-first-step-died-${point}-${status}`, [workflowId]);
    } finally {
      await doomed.kill().catch(() => undefined);
    }
  },
  120_000,
);

async function entriesOf(h: ApiWorld, walletId: string) {
  return (await h.request('GET', `/v1/wallets/${walletId}/entries`)).body.entries as {
    kind: string;
    amount: number;
    at: string;
  }[];
}

/** A ledger whose first capture from a local activity answers only after `delayMs`, its COMMIT made at once. */
function slowFirstCapture(pool: Pool, delayMs: number): WalletLedger {
  let slowed = false;
  return new (class extends WalletLedger {
    override async capture(args: SettleArgs): Promise<SettleResult> {
      const result = await super.capture(args);
      if (inLocalActivity() && !slowed) {
        slowed = true;
        await new Promise((resolve) => setTimeout(resolve, delayMs));
      }
      return result;
    }
  })(pool);
}

it('a first step that outlasts its timeout (its capture committed, its answer late): the separate steps read it back', async () => {
  // 18 s: past the step's timeout (the 3 s attempt bound, its 2 s margin and 12 s for the wallet steps). Temporal
  // gives the step up with nothing said: it may have held, sent and settled. The payment's own hold reads the hold back,
  // the create goes as possibly sent (the provider answers its key as before), the capture reads the capture back.
  const db = await openTestDatabase();
  opened.push(db);
  // No provider webhooks: the provider's news of the create would move the payment on while the step is out, and the
  // settlement's activity would capture (as it may); here the task's own steps do.
  const h = await startWorld(env, { api: true, webhooks: false, wallets: slowFirstCapture(db.pool, 18_000) });
  worlds.push(h);
  const walletId = await fundedWallet(h, 1_000);
  const key = newKey();
  const body = chargeBody({ amount: { value: 1_000, currency: 'EUR' }, wallet: { walletId, amount: 400 } });
  const answered = await h.request('POST', '/v1/payments', { key, body });
  expect([200, 202]).toContain(answered.status);
  const settled = await eventually(
    'the payment settled',
    async () => {
      const v = (await h.request('GET', `/v1/payments/${key}`)).body;
      return v.status === 'succeeded' && (v.wallet as { status?: string } | undefined)?.status === 'captured'
        ? v
        : undefined;
    },
    60_000,
  );
  // The view may show the capture a moment before its task is recorded.
  const history = await eventually(
    'the capture recorded',
    async () => {
      const x = await historyOf(chargeWorkflowId(h.a.id, key));
      return x.localActivities.length >= 4 ? x : undefined;
    },
    10_000,
  );
  expect(history.localActivities).toEqual([
    'firstCreateAttempt',
    'holdWallet',
    'firstCreateAttempt',
    'captureWalletHold',
  ]);
  const entries = await entriesOf(h, walletId);
  expect(entries.map((e) => [e.kind, e.amount])).toEqual([
    ['credit', 1_000],
    ['hold', 400],
    ['capture', 400],
  ]);
  expect(settled.updatedAt).toBe(entries[2]?.at);
  expect(
    h
      .ledger()
      .effects.filter((e) => e.reference === body.orderId)
      .map((e) => [e.operation, e.amount]),
  ).toEqual([['create', 600]]);
  // The step that said nothing may have sent: counted, and the create's own attempt.
  expect(settled.attempts).toBe(2);
  await recordHistories({ env }, 'wallet-split-first-step-timed-out', [chargeWorkflowId(h.a.id, key)]);
}, 90_000);
