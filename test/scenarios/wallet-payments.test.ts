/**
 * Payments with a wallet part (docs/http-api.md#payments-with-a-wallet-part) through the real stack: PostgreSQL (this
 * file's database), the dev server, the API over HTTP, the workers and the simulator. Every case reads the wallet's
 * entries and the simulator's ledger, not only the payment's view: the hold comes first, the provider is charged for
 * the rest only, the hold is captured on success, released on a decline or a failure, kept while the outcome is unknown.
 */
import { randomUUID } from 'node:crypto';
import pino from 'pino';
import { Registry } from 'prom-client';
import { ApplicationFailure, defaultPayloadConverter } from '@temporalio/common';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { walletMetricsObserver } from '../../src/metrics/wallet-metrics';
import { chargeWorkflowId } from '../../src/domain/ids';
import { ChargeRequest } from '../../src/domain/payment';
import type { ChargeWorkflowInput } from '../../src/domain/workflow-inputs';
import type { RestProvider } from '../../src/providers';
import {
  type DebitResult,
  type HoldArgs,
  type HoldResult,
  type SettleArgs,
  type SettleResult,
  WalletLedger,
} from '../../src/wallets';
import { openTestDatabase } from '../helpers/database';
import { refusingProvider } from '../helpers/refusing-provider';
import { connectDevServer } from '../helpers/servers';
import { localActivityTypeOf, recordHistories } from '../helpers/workflows';
import { type ApiWorld, chargeBody, fundedWallet, newKey, startWorld, testTimings } from '../helpers/world';
import { eventually } from '../helpers/eventually';

let env: TestWorkflowEnvironment;
let db: Awaited<ReturnType<typeof openTestDatabase>>;
let h: ApiWorld;
let bare: ApiWorld;
let down: RestProvider;
/** The workers' metrics: their ledger counts into it, as the worker process's does (src/stack.ts). */
const workerRegistry = new Registry();

const stayedAway = () =>
  Promise.reject(ApplicationFailure.nonRetryable('injected: the database stayed away', 'InjectedFault'));

/**
 * The ledger, with faults a test can arm, each as a step whose database stayed away through its whole budget would
 * end: the next capture of a payment key fails without writing anything; the next two debits of a payment key (the
 * API's and the workflow's first: both debit a wallet-only payment) fail without writing anything (`before`) or after
 * their COMMIT (`after`: the answer lost). Every other call is the real one.
 */
class FaultLedger extends WalletLedger {
  /** Payment keys whose next captures fail, and how many more. */
  readonly capturesToFail = new Map<string, number>();
  /** Payment keys whose next holds fail, and how many more. */
  readonly holdsToFail = new Map<string, number>();
  failCaptures(paymentKey: string, times: number): void {
    this.capturesToFail.set(paymentKey, times);
  }
  failHolds(paymentKey: string, times: number): void {
    this.holdsToFail.set(paymentKey, times);
  }
  /** Whether this call of `paymentKey` fails, counting it down. */
  private failsNow(faults: Map<string, number>, paymentKey: string): boolean {
    const left = faults.get(paymentKey);
    if (left === undefined) return false;
    if (left <= 1) faults.delete(paymentKey);
    else faults.set(paymentKey, left - 1);
    return true;
  }
  override hold(args: HoldArgs): Promise<HoldResult> {
    if (!this.failsNow(this.holdsToFail, args.paymentKey)) return super.hold(args);
    return stayedAway();
  }
  readonly failNextDebitOf = new Map<string, 'before' | 'after'>();
  /** The payment keys of every debit called, in order (the API's and the workflows'). */
  readonly debitsCalled: string[] = [];
  private readonly debitFaultsLeft = new Map<string, number>();
  override capture(args: SettleArgs): Promise<SettleResult> {
    if (!this.failsNow(this.capturesToFail, args.paymentKey)) return super.capture(args);
    return stayedAway();
  }
  private readonly debitsToPass = new Map<string, number>();
  /**
   * Fails the next `times` debits of `paymentKey` as `fault` says (default both, the API's and the workflow's), after
   * letting the first `pass` of them through (1: the API's debit decides, the workflow's fails).
   */
  failDebits(paymentKey: string, fault: 'before' | 'after', times = 2, pass = 0): void {
    this.failNextDebitOf.set(paymentKey, fault);
    this.debitFaultsLeft.set(paymentKey, times);
    this.debitsToPass.set(paymentKey, pass);
  }
  override async debit(args: HoldArgs): Promise<DebitResult> {
    this.debitsCalled.push(args.paymentKey);
    const fault = this.failNextDebitOf.get(args.paymentKey);
    const pass = this.debitsToPass.get(args.paymentKey) ?? 0;
    if (pass > 0) this.debitsToPass.set(args.paymentKey, pass - 1);
    if (fault === undefined || pass > 0) return super.debit(args);
    const left = (this.debitFaultsLeft.get(args.paymentKey) ?? 1) - 1;
    this.debitFaultsLeft.set(args.paymentKey, left);
    if (left <= 0) this.failNextDebitOf.delete(args.paymentKey);
    if (fault === 'after') await super.debit(args);
    return stayedAway();
  }
}
let ledger: FaultLedger;

beforeAll(async () => {
  env = await connectDevServer();
  db = await openTestDatabase();
  down = await refusingProvider('down', pino({ level: 'silent' }));
  ledger = new FaultLedger(db.pool, walletMetricsObserver(workerRegistry));
  h = await startWorld(env, {
    api: true,
    wallets: ledger,
    extraProviders: { down },
    // No provider webhooks: an unknown outcome stays unknown until the reconcile asks, 2 s later; its resubmission
    // comes at its second look, after the settle window.
    webhooks: false,
    timings: { reconcileScheduleMs: [2_000, 2_000], settleWindowMs: 3_000 },
  });
  // A stack without a ledger (no DATABASE_URL): nothing may start for a payment with a wallet part.
  bare = await startWorld(env, { api: true, workers: false });
});
afterAll(async () => {
  await h?.close();
  await bare?.close();
  await down?.close();
  await db?.drop();
  await env?.teardown();
});

interface Entry {
  readonly kind: string;
  readonly amount: number;
  readonly paymentKey?: string;
  readonly at: string;
}

/** A fresh wallet of merchant A credited with `balance` EUR minor units. */
const walletWith = (balance: number): Promise<string> => fundedWallet(h, balance);

const walletOf = async (walletId: string) => (await h.request('GET', `/v1/wallets/${walletId}`)).body;
const entriesOf = async (walletId: string): Promise<Entry[]> =>
  (await h.request('GET', `/v1/wallets/${walletId}/entries`)).body.entries as Entry[];
/** When the ledger recorded the wallet's one entry of `kind`. */
const settledAtOf = async (walletId: string, kind: string) =>
  (await entriesOf(walletId)).filter((e) => e.kind === kind).map((e) => e.at)[0];
/** The (kind, amount) of each entry after the first credit. */
const movesOf = async (walletId: string) => (await entriesOf(walletId)).slice(1).map((e) => [e.kind, e.amount]);
const simOf = (orderId: string) => {
  const ledger = h.ledger();
  return {
    requests: ledger.requests.filter((r) => r.reference === orderId),
    effects: ledger.effects.filter((e) => e.reference === orderId),
  };
};
const pay = (key: string, body: Record<string, unknown>, harness: ApiWorld = h) =>
  harness.request('POST', '/v1/payments', { key, body });
/** The payment's history events. */
const eventsOf = async (key: string) =>
  (await env.client.workflow.getHandle(chargeWorkflowId(h.a.id, key)).fetchHistory()).events ?? [];
/** The wallet steps among a payment's events, in order: local activity or activity, its type, its summary. */
function walletSteps(events: Awaited<ReturnType<typeof eventsOf>>): [string, string, string][] {
  return events.flatMap((e): [string, string, string][] => {
    const local = localActivityTypeOf(e);
    const [kind, name] = local
      ? ['local', local]
      : ['activity', e.activityTaskScheduledEventAttributes?.activityType?.name];
    const summary = e.userMetadata?.summary && defaultPayloadConverter.fromPayload<string>(e.userMetadata.summary);
    // A split payment's first step holds and settles its wallet part itself (patch `wallet-split-first-step`).
    const walletStep = name?.includes('Wallet') || summary?.includes('the wallet part');
    return name && summary && walletStep ? [[kind, name, summary]] : [];
  });
}
/** The summary of a split payment's first step: its hold, its card part's local first attempt, its settlement. */
const splitFirstStep = expect.stringMatching(
  /^hold the wallet part, .+ \(local first attempt\), settle the wallet part$/,
);
const view = async (key: string) => (await h.request('GET', `/v1/payments/${encodeURIComponent(key)}`)).body;
/** The payment's view once its status is `status` (any, when absent) and its wallet part's is `wallet`. */
const settledAs = (key: string, wallet: 'captured' | 'released', status?: string, timeoutMs?: number) =>
  eventually(
    `wallet part ${wallet}${status ? `, payment ${status}` : ''}`,
    async () => {
      const v = await view(key);
      const ok = (v.wallet as { status: string }).status === wallet && (status === undefined || v.status === status);
      return ok ? v : undefined;
    },
    timeoutMs,
  );

describe('POST /v1/payments with a wallet part: validation', () => {
  it('answers 400 naming the field for a bad wallet part, and starts nothing', async () => {
    const walletId = await walletWith(1_000);
    const order = `order_${randomUUID()}`;
    const over = await pay(newKey(), chargeBody({ orderId: order, wallet: { walletId, amount: 1_001 } }));
    const zero = await pay(newKey(), chargeBody({ orderId: order, wallet: { walletId, amount: 0 } }));
    const fraction = await pay(newKey(), chargeBody({ orderId: order, wallet: { walletId, amount: 1.5 } }));
    const manual = await pay(
      newKey(),
      chargeBody({ orderId: order, capture: 'manual', wallet: { walletId, amount: 1 } }),
    );
    const missing = await pay(newKey(), chargeBody({ orderId: order, wallet: { walletId: 'w-none', amount: 1 } }));
    const currency = await pay(
      newKey(),
      chargeBody({ orderId: order, amount: { value: 1_000, currency: 'USD' }, wallet: { walletId, amount: 1 } }),
    );
    const noLedger = await pay(newKey(), chargeBody({ orderId: order, wallet: { walletId, amount: 1 } }), bare);

    const fields = (r: Awaited<ReturnType<typeof pay>>) => [r.status, r.body.error?.fields?.map((f) => f.path)];
    expect(fields(over)).toEqual([400, ['wallet.amount']]);
    expect(fields(zero)).toEqual([400, ['wallet.amount']]);
    expect(fields(fraction)).toEqual([400, ['wallet.amount']]);
    expect(fields(manual)).toEqual([400, ['wallet']]);
    expect(fields(missing)).toEqual([400, ['wallet.walletId']]);
    expect(fields(currency)).toEqual([400, ['amount.currency']]);
    expect(fields(noLedger)).toEqual([400, ['wallet']]);
    // Nothing started: no hold, nothing at the provider, no payment under the order.
    expect(await movesOf(walletId)).toEqual([]);
    expect(simOf(order).requests).toEqual([]);
    const listed = await h.request('GET', `/v1/payments?orderId=${order}`);
    expect(listed.body.payments).toEqual([]);
  });

  it('fingerprints the wallet part: the same key with another wallet part is 422 idempotency_key_reused', async () => {
    const walletId = await walletWith(1_000);
    const key = newKey();
    const body = chargeBody({ wallet: { walletId, amount: 300 } });
    const first = await pay(key, body);
    const other = await pay(key, { ...body, wallet: { walletId, amount: 301 } });
    const none = await pay(key, { ...body, wallet: undefined });

    expect(first.status).toBe(200);
    expect(other.status).toBe(422);
    expect(other.body.error?.type).toBe('idempotency_key_reused');
    expect(none.status).toBe(422);
    await settledAs(key, 'captured');
    expect(await movesOf(walletId)).toEqual([
      ['hold', 300],
      ['capture', 300],
    ]);
  });
});

describe('POST /v1/payments with a wallet part: the money', () => {
  it('a split payment whose card part succeeds: the hold captured, the provider charged only the rest', async () => {
    const walletId = await walletWith(1_000);
    const key = newKey();
    const body = chargeBody({ amount: { value: 1_500, currency: 'EUR' }, wallet: { walletId, amount: 400 } });
    const res = await pay(key, body);

    expect(res.status).toBe(200);
    // Settled in the card part's task: the answer already shows the hold captured.
    expect(res.body).toMatchObject({ status: 'succeeded', amountCaptured: 1_100, wallet: { status: 'captured' } });
    // Stamped with the ledger's time of the capture, which every replay of the run reads back alike.
    expect(res.body.updatedAt).toBe(await settledAtOf(walletId, 'capture'));
    const settled = await settledAs(key, 'captured');
    expect(settled.wallet).toEqual({ walletId, amount: 400, status: 'captured', refunded: 0 });
    expect(await walletOf(walletId)).toMatchObject({ balance: 600, held: 0, available: 600 });
    expect(await movesOf(walletId)).toEqual([
      ['hold', 400],
      ['capture', 400],
    ]);
    const sim = simOf(body.orderId as string);
    expect(sim.effects.map((e) => [e.operation, e.amount])).toEqual([['create', 1_100]]);
    // The web UI tells it: each wallet step carries a summary; the hold, the card's first attempt and the capture are
    // one local activity of the first task, so the answer waits for no other task and no other step.
    const events = await eventsOf(key);
    expect(walletSteps(events)).toEqual([['local', 'firstCreateAttempt', splitFirstStep]]);
    expect(events.filter((e) => e.workflowTaskCompletedEventAttributes).length).toBe(1);
    const metrics = await workerRegistry.metrics();
    expect(metrics).toMatch(/payments_wallet_operations_total\{kind="hold",outcome="applied"\} [1-9]/);
    expect(metrics).toMatch(/payments_wallet_operations_total\{kind="capture",outcome="applied"\} [1-9]/);
    await recordHistories(h, 'wallet-split-payment-succeeded', [chargeWorkflowId(h.a.id, key)]);
  });

  it('a split payment whose capture in the task fails: answered with the hold held, the settlement activity captures it once', async () => {
    const walletId = await walletWith(1_000);
    const key = newKey();
    // The first step's capture and the task's own: both fail, the settlement's activity captures.
    ledger.failCaptures(key, 2);
    const body = chargeBody({ amount: { value: 1_500, currency: 'EUR' }, wallet: { walletId, amount: 400 } });
    const res = await pay(key, body);

    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ status: 'succeeded', amountCaptured: 1_100, wallet: { status: 'held' } });
    expect((await settledAs(key, 'captured')).wallet).toEqual({
      walletId,
      amount: 400,
      status: 'captured',
      refunded: 0,
    });
    expect(ledger.capturesToFail.has(key)).toBe(false);
    expect(await walletOf(walletId)).toMatchObject({ balance: 600, held: 0, available: 600 });
    expect(await movesOf(walletId)).toEqual([
      ['hold', 400],
      ['capture', 400],
    ]);
    expect(walletSteps(await eventsOf(key))).toEqual([
      ['local', 'firstCreateAttempt', splitFirstStep],
      ['local', 'captureWalletHold', expect.stringContaining('settle the wallet part as the card part decided it')],
      ['activity', 'captureWalletHold', expect.stringContaining('capture the wallet part: the payment succeeded')],
    ]);
  });

  it('a split payment whose first step cannot hold (the database stayed away): its own hold takes over, charged once', async () => {
    const walletId = await walletWith(1_000);
    const key = newKey();
    ledger.failHolds(key, 1);
    const body = chargeBody({ amount: { value: 1_500, currency: 'EUR' }, wallet: { walletId, amount: 400 } });
    const res = await pay(key, body);

    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ status: 'succeeded', amountCaptured: 1_100, wallet: { status: 'captured' } });
    // Nothing was sent by the step that held nothing: one attempt, the create's own.
    expect(res.body.attempts).toBe(1);
    expect(ledger.holdsToFail.has(key)).toBe(false);
    expect(await movesOf(walletId)).toEqual([
      ['hold', 400],
      ['capture', 400],
    ]);
    expect(simOf(body.orderId as string).requests.filter((r) => r.operation === 'create')).toHaveLength(1);
    // The step, then the payment's own hold, the card part's first attempt alone, and the capture in the task.
    expect(walletSteps(await eventsOf(key))).toEqual([
      ['local', 'firstCreateAttempt', splitFirstStep],
      ['local', 'holdWallet', expect.stringContaining('hold the payment’s wallet part')],
      ['local', 'captureWalletHold', expect.stringContaining('settle the wallet part as the card part decided it')],
    ]);
  });

  it('a split payment whose card part is declined: the hold released, the balance back, nothing charged', async () => {
    const walletId = await walletWith(1_000);
    const key = newKey();
    const body = chargeBody({ paymentMethod: 'pm_decline_card', wallet: { walletId, amount: 400 } });
    const res = await pay(key, body);

    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ status: 'declined', wallet: { status: 'released' } });
    expect(res.body.updatedAt).toBe(await settledAtOf(walletId, 'release'));
    await settledAs(key, 'released');
    expect(await walletOf(walletId)).toMatchObject({ balance: 1_000, held: 0, available: 1_000 });
    expect(await movesOf(walletId)).toEqual([
      ['hold', 400],
      ['release', 400],
    ]);
    const sim = simOf(body.orderId as string);
    expect(sim.requests.map((r) => r.operation)).toContain('create');
    expect(sim.effects).toEqual([]);
    expect(walletSteps(await eventsOf(key))).toEqual([['local', 'firstCreateAttempt', splitFirstStep]]);
    await recordHistories(h, 'wallet-split-payment-declined', [chargeWorkflowId(h.a.id, key)]);
  });

  it('a split payment whose card part fails before it is sent: failed, the hold released', async () => {
    const walletId = await walletWith(1_000);
    const key = newKey();
    const res = await pay(key, chargeBody({ provider: 'down', wallet: { walletId, amount: 400 } }));

    const failed = await settledAs(key, 'released', 'failed', 20_000);
    expect([200, 202]).toContain(res.status);
    expect(failed.failureReason).toBe('provider_unavailable');
    expect(await walletOf(walletId)).toMatchObject({ balance: 1_000, held: 0, available: 1_000 });
    expect(await movesOf(walletId)).toEqual([
      ['hold', 400],
      ['release', 400],
    ]);
  });

  it('an unknown card part keeps the hold; the reconcile finds it succeeded and the hold is captured', async () => {
    const walletId = await walletWith(1_000);
    const key = newKey();
    const body = chargeBody({ wallet: { walletId, amount: 400 } });
    const orderId = body.orderId as string;
    // The first create committed and its answer lost, the retries refused: unknown, then the reconcile finds it.
    await h.sim.addFaults({
      rules: [
        { match: { operation: 'create', reference: orderId }, fault: 'commit_then_drop', times: 1 },
        { match: { operation: 'create', reference: orderId }, fault: 'status', status: 503, times: 5 },
      ],
    });
    const res = await pay(key, body);

    expect(res.status).toBe(202);
    const unknown = await view(key);
    expect(unknown.status).toBe('unknown');
    expect(unknown.wallet).toMatchObject({ status: 'held' });
    expect(await walletOf(walletId)).toMatchObject({ balance: 1_000, held: 400, available: 600 });
    expect(await movesOf(walletId)).toEqual([['hold', 400]]);

    await settledAs(key, 'captured', 'succeeded', 30_000);
    expect(await walletOf(walletId)).toMatchObject({ balance: 600, held: 0 });
    expect(await movesOf(walletId)).toEqual([
      ['hold', 400],
      ['capture', 400],
    ]);
    expect(simOf(orderId).effects.map((e) => [e.operation, e.amount])).toEqual([['create', 600]]);
  });

  it('an unknown card part keeps the hold; the reconcile’s resubmission is declined and the hold is released', async () => {
    const walletId = await walletWith(1_000);
    const key = newKey();
    const body = chargeBody({ paymentMethod: 'pm_decline_card', wallet: { walletId, amount: 400 } });
    const orderId = body.orderId as string;
    // Refused before anything was committed, but the payment cannot know: unknown, then the reconcile asks again.
    await h.sim.addFaults({
      rules: [{ match: { operation: 'create', reference: orderId }, fault: 'reset_before_commit', times: 3 }],
    });
    const res = await pay(key, body);

    expect(res.status).toBe(202);
    expect((await view(key)).wallet).toMatchObject({ status: 'held' });
    expect(await walletOf(walletId)).toMatchObject({ held: 400, available: 600 });

    const declined = await settledAs(key, 'released', 'declined', 30_000);
    expect(declined.declineCode).not.toBe('wallet_insufficient_funds');
    expect(await walletOf(walletId)).toMatchObject({ balance: 1_000, held: 0, available: 1_000 });
    expect(await movesOf(walletId)).toEqual([
      ['hold', 400],
      ['release', 400],
    ]);
    expect(simOf(orderId).effects).toEqual([]);
  });

  it('a card part in review keeps the hold; the operator’s `failed` verdict releases it', async () => {
    const walletId = await walletWith(1_000);
    const key = newKey();
    const body = chargeBody({ wallet: { walletId, amount: 400 } });
    const orderId = body.orderId as string;
    // Every create of this order is answered 500 before anything is committed: unknown, the reconcile finds nothing.
    await h.sim.addFaults({
      rules: [{ match: { operation: 'create', reference: orderId }, fault: 'status', status: 500 }],
    });
    expect((await pay(key, body)).status).toBe(202);
    await eventually('in review', async () => (await view(key)).status === 'needs_review', 60_000);
    expect((await view(key)).wallet).toMatchObject({ status: 'held' });
    expect(await walletOf(walletId)).toMatchObject({ balance: 1_000, held: 400, available: 600 });

    const verdict = await h.request('POST', `/v1/payments/${encodeURIComponent(key)}/resolve?merchantId=${h.a.id}`, {
      token: h.operator.token,
      body: { outcome: 'failed', note: 'nothing at the provider' },
    });
    expect(verdict.status).toBe(200);
    await settledAs(key, 'released');
    expect(await walletOf(walletId)).toMatchObject({ balance: 1_000, held: 0, available: 1_000 });
    expect(await movesOf(walletId)).toEqual([
      ['hold', 400],
      ['release', 400],
    ]);
    expect(simOf(orderId).effects).toEqual([]);
  }, 90_000);

  it('a wallet-only payment: captured in the first answer, no provider call at all', async () => {
    const walletId = await walletWith(1_000);
    const key = newKey();
    const body = chargeBody({ amount: { value: 700, currency: 'EUR' }, wallet: { walletId, amount: 700 } });
    const res = await pay(key, body);

    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      status: 'succeeded',
      amountCaptured: 0,
      wallet: { walletId, amount: 700, status: 'captured', refunded: 0 },
    });
    expect(await walletOf(walletId)).toMatchObject({ balance: 300, held: 0 });
    expect(await movesOf(walletId)).toEqual([
      ['hold', 700],
      ['capture', 700],
    ]);
    expect(simOf(body.orderId as string).requests).toEqual([]);
    // The API answered from its own debit; the workflow's debit (the hold and its capture in one transaction, in its
    // first workflow task) read that decision back: one task, one capture, and its first answer is the API's body.
    const events = await eventually('the payment’s first task', async () => {
      const e = await eventsOf(key);
      return e.some((x) => x.workflowTaskCompletedEventAttributes) ? e : undefined;
    });
    expect(walletSteps(events)).toEqual([
      ['local', 'debitWallet', expect.stringContaining('hold and capture in one transaction')],
    ]);
    expect(events.filter((e) => e.workflowTaskCompletedEventAttributes).length).toBe(1);
    const repeat = await pay(key, body);
    expect(repeat.headers.get('idempotent-replayed')).toBe('true');
    expect(repeat.body).toEqual(res.body);
    expect(await movesOf(walletId)).toEqual([
      ['hold', 700],
      ['capture', 700],
    ]);
    await recordHistories(h, 'wallet-only-payment', [chargeWorkflowId(h.a.id, key)]);
  });

  it('a wallet-only payment is answered from the ledger before any worker runs, and its workflow keeps that answer even when money arrives in between', async () => {
    // No worker polls this world's task queue until the answers are in: the API answered from its own debit.
    const late = await startWorld(env, { api: true, wallets: ledger, workers: false, webhooks: false });
    try {
      const credited = async (walletId: string, value: number) =>
        (
          await late.request('POST', `/v1/wallets/${walletId}/credits`, {
            key: newKey(),
            body: { amount: { value, currency: 'EUR' } },
          })
        ).status;
      const [rich, poor] = [`w-${randomUUID().slice(0, 8)}`, `w-${randomUUID().slice(0, 8)}`];
      expect(await credited(rich, 1_000)).toBe(200);
      expect(await credited(poor, 100)).toBe(200);
      const paid = {
        key: newKey(),
        body: chargeBody({ amount: { value: 700, currency: 'EUR' }, wallet: { walletId: rich, amount: 700 } }),
      };
      const short = {
        key: newKey(),
        body: chargeBody({ amount: { value: 300, currency: 'EUR' }, wallet: { walletId: poor, amount: 300 } }),
      };
      const first = await Promise.all([paid, short].map((p) => pay(p.key, p.body, late)));

      expect(first.map((r) => r.status)).toEqual([200, 200]);
      expect(first[0]?.body).toMatchObject({ status: 'succeeded', wallet: { status: 'captured' } });
      expect(first[1]?.body).toMatchObject({
        status: 'declined',
        declineCode: 'wallet_insufficient_funds',
        wallet: { status: 'released' },
      });
      const handleOf = (key: string) => env.client.workflow.getHandle(chargeWorkflowId(late.a.id, key));
      for (const p of [paid, short]) {
        const events = (await handleOf(p.key).fetchHistory()).events ?? [];
        expect(events.filter((e) => e.workflowTaskCompletedEventAttributes)).toEqual([]);
      }
      // The money that would cover the declined payment arrives before its workflow's first task.
      expect(await credited(poor, 1_000)).toBe(200);
      await late.startWorkers();

      for (const [i, p] of [paid, short].entries()) {
        await eventually('the workflow’s first answer', async () => {
          const events = (await handleOf(p.key).fetchHistory()).events ?? [];
          return events.some((e) => e.workflowTaskCompletedEventAttributes) ? true : undefined;
        });
        const repeat = await pay(p.key, p.body, late);
        expect(repeat.headers.get('idempotent-replayed')).toBe('true');
        expect(repeat.body).toEqual(first[i]?.body);
        expect((await late.request('GET', `/v1/payments/${encodeURIComponent(p.key)}`)).body).toEqual(first[i]?.body);
      }
      const movesIn = async (walletId: string) =>
        ((await late.request('GET', `/v1/wallets/${walletId}/entries`)).body.entries as Entry[])
          .slice(1)
          .map((e) => [e.kind, e.amount]);
      expect(await movesIn(rich)).toEqual([
        ['hold', 700],
        ['capture', 700],
      ]);
      // The decline is recorded (a 0 release) and holds: nothing was taken after the money came.
      expect(await movesIn(poor)).toEqual([
        ['release', 0],
        ['credit', 1_000],
      ]);
      expect((await late.request('GET', `/v1/wallets/${poor}`)).body).toMatchObject({ balance: 1_100, held: 0 });
      await recordHistories(
        late,
        'wallet-only-answered-by-api',
        [paid, short].map((p) => chargeWorkflowId(late.a.id, p.key)),
      );
    } finally {
      await late.close();
    }
  });

  it.each([
    [
      'after',
      'succeeded',
      'captured',
      [
        ['hold', 700],
        ['capture', 700],
      ],
      300,
    ],
    ['before', 'failed', 'released', [['release', 0]], 1_000],
  ] as const)(
    'a wallet-only debit whose outcome stayed unknown (database gone %s its COMMIT): the release decides, the payment is %s',
    async (fault, status, part, moves, balance) => {
      const walletId = await walletWith(1_000);
      const key = newKey();
      ledger.failDebits(key, fault);
      const body = chargeBody({ amount: { value: 700, currency: 'EUR' }, wallet: { walletId, amount: 700 } });
      const res = await pay(key, body);

      expect([200, 202]).toContain(res.status);
      const settled = await settledAs(key, part, status);
      expect(settled).toMatchObject({ status, wallet: { walletId, amount: 700, status: part } });
      if (status === 'failed') expect(settled.failureReason).toBe('wallet_unavailable');
      expect(ledger.failNextDebitOf.has(key)).toBe(false);
      expect(await movesOf(walletId)).toEqual(moves);
      expect(await walletOf(walletId)).toMatchObject({ balance, held: 0 });
      expect(walletSteps(await eventsOf(key))).toEqual([
        ['local', 'debitWallet', expect.stringContaining('hold and capture in one transaction')],
        ['activity', 'releaseWalletHold', expect.stringContaining('debit whose outcome is unknown')],
      ]);
      // A late debit of the key (a lost attempt arriving now) takes nothing more: refused, or read back.
      const late = ledger.debit({ merchantId: h.a.id, walletId, paymentKey: key, amount: 700, currency: 'EUR' });
      if (status === 'failed') await expect(late).rejects.toMatchObject({ type: 'HoldSettled' });
      else await expect(late).resolves.toMatchObject({ status: 'captured', replayed: true });
      expect(await movesOf(walletId)).toEqual(moves);
      expect(simOf(body.orderId as string).requests).toEqual([]);
    },
  );

  it.each([
    ['declined', 100, [['release', 0]], 100],
    [
      'succeeded',
      1_000,
      [
        ['hold', 700],
        ['capture', 700],
      ],
      300,
    ],
  ] as const)(
    'a wallet-only payment whose API debit decided and whose workflow’s own debit stayed unknown: the release reads the decision, the workflow answers the API’s body (%s)',
    async (status, funds, moves, balance) => {
      const walletId = await walletWith(funds);
      const key = newKey();
      ledger.failDebits(key, 'before', 1, 1);
      const body = chargeBody({ amount: { value: 700, currency: 'EUR' }, wallet: { walletId, amount: 700 } });
      const first = await pay(key, body);

      expect(first.status).toBe(200);
      expect(first.body).toMatchObject({ status });
      // The workflow's debit failed; its release decided the payment (read the API's decline, or refused: captured).
      await eventually('the workflow’s release decided the payment', async () => {
        const events = await eventsOf(key);
        const released = events.some(
          (e) => e.activityTaskCompletedEventAttributes ?? e.activityTaskFailedEventAttributes,
        );
        return released && (await view(key)).status !== 'pending' ? true : undefined;
      });
      expect(walletSteps(await eventsOf(key))).toEqual([
        ['local', 'debitWallet', expect.stringContaining('hold and capture in one transaction')],
        ['activity', 'releaseWalletHold', expect.stringContaining('debit whose outcome is unknown')],
      ]);
      const repeat = await pay(key, body);
      expect(repeat.headers.get('idempotent-replayed')).toBe('true');
      expect(repeat.body).toEqual(first.body);
      expect(await view(key)).toEqual(first.body);
      expect(await movesOf(walletId)).toEqual(moves);
      expect(await walletOf(walletId)).toMatchObject({ balance, held: 0 });
      await recordHistories(h, `wallet-only-api-decided-${status}`, [chargeWorkflowId(h.a.id, key)]);
    },
  );

  it('a wallet-only payment whose API debit finds the database away: the workflow’s debit decides, answered succeeded', async () => {
    const walletId = await walletWith(1_000);
    const key = newKey();
    ledger.failDebits(key, 'before', 1);
    const body = chargeBody({ amount: { value: 700, currency: 'EUR' }, wallet: { walletId, amount: 700 } });
    const res = await pay(key, body);

    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ status: 'succeeded', wallet: { status: 'captured' } });
    expect(ledger.debitsCalled.filter((k) => k === key)).toHaveLength(2);
    expect(await movesOf(walletId)).toEqual([
      ['hold', 700],
      ['capture', 700],
    ]);
    expect(await walletOf(walletId)).toMatchObject({ balance: 300, held: 0 });
  });

  it('a wallet-only payment’s key repeated with another amount: 422, and no debit of the other amount is tried', async () => {
    const walletId = await walletWith(1_000);
    const key = newKey();
    const body = chargeBody({ amount: { value: 700, currency: 'EUR' }, wallet: { walletId, amount: 700 } });
    const first = await pay(key, body);
    await settledAs(key, 'captured', 'succeeded');
    const calledBefore = ledger.debitsCalled.filter((k) => k === key).length;
    const other = await pay(key, {
      ...body,
      amount: { value: 500, currency: 'EUR' },
      wallet: { walletId, amount: 500 },
    });

    expect(first.status).toBe(200);
    expect(other.status).toBe(422);
    expect(other.body.error?.type).toBe('idempotency_key_reused');
    // The start was refused (the key's payment exists): nothing reached the ledger for the second body.
    expect(ledger.debitsCalled.filter((k) => k === key)).toHaveLength(calledBefore);
    expect(await movesOf(walletId)).toEqual([
      ['hold', 700],
      ['capture', 700],
    ]);
  });

  it.each([
    ['split', 'no such wallet', 'wallet_not_found'],
    ['wallet-only', 'no such wallet', 'wallet_not_found'],
    ['split', 'a wallet in another currency', 'wallet_currency_mismatch'],
    ['wallet-only', 'a wallet in another currency', 'wallet_currency_mismatch'],
  ] as const)(
    'a %s payment started naming %s (no API or client to check it): failed %s, nothing taken, no provider call',
    async (shape, _wallet, reason) => {
      // The API and the client refuse such a part with a 400 before starting anything (the validation test above); a
      // starter that skipped them reaches the workflow, whose hold or debit the ledger refuses for good.
      const euros = await walletWith(1_000);
      const walletId = reason === 'wallet_not_found' ? `w-none-${randomUUID().slice(0, 8)}` : euros;
      const key = newKey();
      const request = ChargeRequest.parse(
        chargeBody({
          amount: { value: shape === 'split' ? 1_000 : 400, currency: reason === 'wallet_not_found' ? 'EUR' : 'USD' },
          wallet: { walletId, amount: 400 },
        }),
      );
      const input: ChargeWorkflowInput = {
        merchantId: h.a.id,
        key,
        fingerprint: 'b'.repeat(64),
        request,
        timings: testTimings,
        shape: 3,
      };
      const handle = await env.client.workflow.start('chargeWorkflow', {
        taskQueue: h.taskQueue,
        workflowId: chargeWorkflowId(h.a.id, key),
        args: [input],
      });
      const settled = await eventually('the payment answered', async () => {
        const v = await view(key);
        return v.status === 'pending' ? undefined : v;
      });

      expect(settled).toMatchObject({ status: 'failed', failureReason: reason, wallet: { status: 'released' } });
      expect(await walletOf(euros)).toMatchObject({ balance: 1_000, held: 0 });
      expect(await movesOf(euros)).toEqual([]);
      expect(simOf(request.orderId).requests).toEqual([]);
      // The first step of the payment's shape was the one refused: a hold (before the card) or a debit.
      // A split payment's first step holds nothing on a refusal and sends nothing; its own hold then fails it.
      expect(walletSteps((await handle.fetchHistory()).events ?? []).map(([, name]) => name)).toEqual(
        shape === 'split' ? ['firstCreateAttempt', 'holdWallet'] : ['debitWallet'],
      );
    },
  );

  it('short funds: declined wallet_insufficient_funds (200), nothing held, no provider call', async () => {
    const walletId = await walletWith(100);
    const key = newKey();
    const body = chargeBody({ wallet: { walletId, amount: 400 } });
    const res = await pay(key, body);

    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      status: 'declined',
      declineCode: 'wallet_insufficient_funds',
      wallet: { status: 'released' },
    });
    expect(await walletOf(walletId)).toMatchObject({ balance: 100, held: 0, available: 100 });
    expect(await movesOf(walletId)).toEqual([]);
    expect(simOf(body.orderId as string).requests).toEqual([]);
    // The first step held nothing and sent nothing; the payment's own hold declined it.
    expect(walletSteps(await eventsOf(key)).map(([, name]) => name)).toEqual(['firstCreateAttempt', 'holdWallet']);
    await recordHistories(h, 'wallet-insufficient-funds', [chargeWorkflowId(h.a.id, key)]);
  });
});

describe('refunds of a payment with a wallet part', () => {
  it('return to the wallet first, up to its captured part, then to the card', async () => {
    const walletId = await walletWith(1_000);
    const key = newKey();
    const body = chargeBody({ wallet: { walletId, amount: 400 } });
    const orderId = body.orderId as string;
    expect((await pay(key, body)).status).toBe(200);
    await settledAs(key, 'captured');
    const refund = (amount: number) =>
      h.request('POST', `/v1/payments/${encodeURIComponent(key)}/refunds`, { key: newKey(), body: { amount } });

    const walletOnly = await refund(300);
    expect(walletOnly.status).toBe(200);
    expect(walletOnly.body).toMatchObject({ amountRefunded: 0, wallet: { status: 'captured', refunded: 300 } });
    expect(simOf(orderId).effects.map((e) => e.operation)).toEqual(['create']);

    const split = await refund(500);
    expect(split.status).toBe(200);
    expect(split.body).toMatchObject({ amountRefunded: 400, wallet: { refunded: 400 } });
    expect(split.body.operations).toEqual([
      expect.objectContaining({ kind: 'refund', amount: 300, state: 'succeeded' }),
      expect.objectContaining({ kind: 'refund', amount: 500, state: 'succeeded' }),
    ]);

    const over = await refund(201);
    expect(over.status).toBe(422);
    expect(over.body.error?.type).toBe('amount_exceeded');

    expect(simOf(orderId).effects.map((e) => [e.operation, e.amount])).toEqual([
      ['create', 600],
      ['refund', 400],
    ]);
    expect(await movesOf(walletId)).toEqual([
      ['hold', 400],
      ['capture', 400],
      ['refund', 300],
      ['refund', 100],
    ]);
    expect(await walletOf(walletId)).toMatchObject({ balance: 1_000, held: 0, available: 1_000 });
    await recordHistories(h, 'wallet-split-payment-refunds', [chargeWorkflowId(h.a.id, key)]);
  });

  it('of a wallet-only payment: all to the wallet, nothing sent to the provider', async () => {
    const walletId = await walletWith(1_000);
    const key = newKey();
    const body = chargeBody({ amount: { value: 700, currency: 'EUR' }, wallet: { walletId, amount: 700 } });
    expect((await pay(key, body)).status).toBe(200);
    const res = await h.request('POST', `/v1/payments/${encodeURIComponent(key)}/refunds`, {
      key: newKey(),
      body: { amount: 200 },
    });

    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ amountRefunded: 0, wallet: { status: 'captured', refunded: 200 } });
    expect(await movesOf(walletId)).toEqual([
      ['hold', 700],
      ['capture', 700],
      ['refund', 200],
    ]);
    expect(await walletOf(walletId)).toMatchObject({ balance: 500 });
    expect(simOf(body.orderId as string).requests).toEqual([]);
  });
});
