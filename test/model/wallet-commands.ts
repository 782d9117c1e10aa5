/**
 * The model's wallet commands (issue 23): credits through the API's wallet endpoint, charges with a wallet part
 * (wallet-only, split with the card, more than the wallet has), refunds of those (wallet first, then card) and exact
 * repeats. They interleave with every other command and adversary; the end-of-sequence checks read the ledger's tables
 * (wallet-invariants.ts).
 */
import type { PaymentView } from '../../src/domain/payment';
import type { ApiResponse } from '../helpers/world';
import { type FaultSpec, describeFault } from './faults';
import { eventually } from '../helpers/eventually';
import {
  type Cmd,
  MOVING,
  OP_ANSWERS,
  arm,
  chargeKillingHolder,
  refusedUnsent,
  sendCharge,
  sendOp,
  seenOf,
} from './commands';
import {
  type ChargeBody,
  type Model,
  type PaymentRec,
  type WalletRec,
  accepted,
  assertOneOf,
  describeAnswer,
  fresh,
  pick,
  see,
  violation,
} from './model';
import type { MerchantName, World } from './world';

const CREDITS = [3_000, 1_200, 5_000] as const;
const CHARGES = [1_000, 2_500, 777] as const;
const OPEN = ['pending', 'unknown', 'requires_action', 'needs_review'];

const hasWallet = (p: PaymentRec) => p.body.wallet !== undefined;
/** Picks `index` among the payments with a wallet part (preferring those that satisfy `prefer`). */
const pickWalletPayment = (m: Model, index: number, prefer: (p: PaymentRec) => boolean) =>
  pick({ ...m, payments: m.payments.filter(hasWallet) }, index, prefer) as PaymentRec;

/** A credit's answer: 200 with a WalletView (the database is the world's own and up). */
function walletAnswer(m: Model, label: string, r: ApiResponse): void {
  if (r.status !== 200 || typeof r.body.balance !== 'number' || typeof r.body.available !== 'number')
    violation(m, `${label}: answered ${r.status}, expected 200 with a wallet: ${JSON.stringify(r.body)}`);
}

/** Credits `amount` to the wallet under a new key (the first credit creates it) and records it. */
async function credit(m: Model, w: World, wallet: WalletRec, amount: number, label: string): Promise<void> {
  const key = fresh(m, 'credit');
  const r = await w.api('POST', `/v1/wallets/${wallet.walletId}/credits`, {
    merchant: wallet.merchant,
    key,
    body: { amount: { value: amount, currency: 'EUR' }, reason: 'model' },
  });
  m.trace.push(
    `${label} [${wallet.merchant}/${wallet.walletId} ${amount}] -> ${r.status} balance=${String(r.body.balance)}`,
  );
  walletAnswer(m, label, r);
  wallet.credits.push({ key, amount, balance: Number(r.body.balance) });
}

/** A new wallet of `merchant`, credited once. */
async function newWallet(m: Model, w: World, merchant: MerchantName, amount: number, label: string) {
  const wallet: WalletRec = { merchant, walletId: fresh(m, 'w'), credits: [] };
  m.wallets.push(wallet);
  await credit(m, w, wallet, amount, label);
  return wallet;
}

/** Credits a wallet (a new one, or one the sequence has), or repeats a credit exactly: the same answer, applied once. */
export class CreditWallet implements Cmd {
  constructor(
    readonly merchant: MerchantName,
    readonly mode: 'new' | 'more' | 'repeat',
    readonly index: number,
    readonly amountIdx: number,
  ) {}
  check = () => true;
  async run(m: Model, w: World) {
    const amount = CREDITS[this.amountIdx % CREDITS.length] as number;
    const own = m.wallets.filter((x) => x.merchant === this.merchant);
    const wallet = own[this.index % Math.max(own.length, 1)];
    if (this.mode === 'new' || !wallet) return void (await newWallet(m, w, this.merchant, amount, this.toString()));
    if (this.mode === 'more') return credit(m, w, wallet, amount, this.toString());
    const first = wallet.credits[this.index % wallet.credits.length] as WalletRec['credits'][number];
    const r = await w.api('POST', `/v1/wallets/${wallet.walletId}/credits`, {
      merchant: wallet.merchant,
      key: first.key,
      body: { amount: { value: first.amount, currency: 'EUR' }, reason: 'model' },
    });
    const label = `${this} [${wallet.walletId} ${first.key}]`;
    m.trace.push(`${label} -> ${r.status} balance=${String(r.body.balance)}`);
    walletAnswer(m, label, r);
    if (r.headers.get('idempotent-replayed') !== 'true') violation(m, `${label}: no Idempotent-Replayed header`);
    if (Number(r.body.balance) !== first.balance)
      violation(m, `${label}: the repeat says balance ${String(r.body.balance)}, the first answer ${first.balance}`);
  }
  toString = () => `creditWallet(${this.merchant}, ${this.mode}, ${CREDITS[this.amountIdx % CREDITS.length]})`;
}

/** How a charge takes its wallet part: all of it, part (the card pays the rest), or more than the wallet has. */
export type WalletShape = 'walletOnly' | 'split' | 'over';

/**
 * A charge with a wallet part on one of the merchant's wallets (a new one when it has none). The wallet's `available`
 * is read first: a part over it must be declined `wallet_insufficient_funds` with nothing sent to the provider (unless
 * another payment of the wallet was still open and may have released its hold meanwhile).
 */
export class WalletCharge implements Cmd {
  constructor(
    readonly merchant: MerchantName,
    readonly shape: WalletShape,
    readonly index: number,
    readonly amountIdx: number,
    readonly fraction: number,
    readonly fault: FaultSpec | undefined,
  ) {}
  check = () => true;
  async run(m: Model, w: World) {
    const own = m.wallets.filter((x) => x.merchant === this.merchant);
    const wallet =
      own[this.index % Math.max(own.length, 1)] ?? (await newWallet(m, w, this.merchant, 3_000, `${this} first`));
    const read = await w.api('GET', `/v1/wallets/${wallet.walletId}`, { merchant: this.merchant });
    const available = Number(read.body.available);
    const price = CHARGES[this.amountIdx % CHARGES.length] as number;
    const [total, part] =
      this.shape === 'over'
        ? [available + 1 + price, available + 1 + Math.floor(price * this.fraction)]
        : this.shape === 'walletOnly'
          ? [Math.max(1, Math.min(available, price)), Math.max(1, Math.min(available, price))]
          : [price, Math.max(1, Math.min(available, Math.floor(price * this.fraction)))];
    const body: ChargeBody = {
      orderId: fresh(m, 'order'),
      amount: { value: total, currency: 'EUR' },
      paymentMethod: 'pm_card_visa',
      capture: 'automatic',
      wallet: { walletId: wallet.walletId, amount: part },
    };
    if (part < total) await arm(w, this.fault, 'create', body.orderId);
    // Another payment of this wallet still open may release its hold (or apply a late one) while this one holds.
    const quiet = !m.payments.some(
      (p) => p.body.wallet?.walletId === wallet.walletId && OPEN.includes(String(p.view?.status)),
    );
    const key = fresh(m, 'pay');
    const label = `${this} [${wallet.walletId} available ${available}: ${part} of ${total}]`;
    const r = await sendCharge(m, w, this.merchant, key, body, label);
    assertOneOf(m, label, r, MOVING);
    const view = r.body as unknown as PaymentView;
    const short = part > available;
    if (quiet && short && (r.status !== 200 || view.declineCode !== 'wallet_insufficient_funds'))
      violation(m, `${label}: more than the wallet has, yet ${describeAnswer(r)} ${String(view.declineCode)}`);
    if (quiet && !short && view.declineCode === 'wallet_insufficient_funds')
      violation(m, `${label}: the wallet had ${available}, yet declined wallet_insufficient_funds`);
    if (quiet && !short && part === total && r.status === 200 && view.status !== 'succeeded')
      violation(m, `${label}: a wallet-only payment the wallet covers answered ${describeAnswer(r)}`);
    if (view.declineCode === 'wallet_insufficient_funds' || part === total) {
      const createKey = w.providerKey(this.merchant, 'create', key);
      const sent = (await w.sim.requests()).filter((q) => q.idempotency_key === createKey);
      if (sent.length > 0) violation(m, `${label}: the provider got ${sent.length} create(s) for it`);
    }
  }
  toString = () =>
    `walletCharge(${this.merchant}, ${this.shape}${this.shape === 'walletOnly' ? '' : ` ${this.fraction}`}, ${
      CHARGES[this.amountIdx % CHARGES.length]
    })${describeFault(this.fault)}`;
}

/**
 * A charge with a wallet part whose worker is SIGKILLed in the payment's first workflow task, where its wallet steps
 * and its card part's local first attempt are local activities (nothing of that task is in history yet; the next
 * worker runs it again, each step under its own operation id or key):
 * - `create` (split): after the wallet part was held and while the card part's first attempt is at the provider (held
 *   1.2 s, committed anyway): the hold is in the ledger (the ledger answers the one it has: W3 fails on a second), the
 *   create possibly sent;
 * - `settle` (split): the card part succeeded and the hold's capture in the task (patch `wallet-settle-in-task`) waits
 *   for the wallet's row, which this command holds locked (`FOR UPDATE`) until the worker is dead: the capture's
 *   transaction dies with it or commits, and the next worker's capture applies it or reads it back (W2/W3 fail on a
 *   second);
 * - `debit` (wallet-only, patch `wallet-direct-debit`): the debit's transaction (hold and capture in one) waits for the
 *   row locked the same way, from before the charge is sent, beside the API's own debit of the payment
 *   (src/client/wallet-only.ts): the worker is killed once both wait. Its transaction dies with it; the API's applies
 *   once the row is unlocked, and the next worker's debit reads it back (one hold, one capture).
 * Then, as every payment: one hold, captured once the payment succeeded, and one create for a card part.
 */
export class CrashDuringWalletCharge implements Cmd {
  constructor(
    readonly merchant: MerchantName,
    readonly during: 'create' | 'settle' | 'debit',
  ) {}
  check = () => true;
  async run(m: Model, w: World) {
    const label = this.toString();
    const wallet = await newWallet(m, w, this.merchant, 3_000, `${label} wallet`);
    const amount = 1_400;
    const body: ChargeBody = {
      orderId: fresh(m, 'order'),
      amount: { value: amount, currency: 'EUR' },
      paymentMethod: 'pm_card_visa',
      capture: 'automatic',
      wallet: { walletId: wallet.walletId, amount: this.during === 'debit' ? amount : 400 },
    };
    if (this.during === 'create') return chargeKillingHolder(m, w, this.merchant, body, label);
    const step = this.during === 'debit' ? 'debit' : 'capture';
    const row = await lockableRow(w, this.merchant, wallet.walletId);
    /**
     * Whether the step's statement came to wait for the locked row: the worker is inside the step when it dies. A
     * wallet-only payment's debit is the API's too: two statements wait then, the API's and the worker's.
     */
    const stepWaits = async () => {
      const waiting = await row.waiter(`${label}'s ${step} waiting for the wallet's row`, step === 'debit' ? 2 : 1);
      m.trace.push(`${label}: ${waiting ? `the ${step} waits for the wallet's row` : `no ${step} came to wait`}`);
      return waiting;
    };
    try {
      if (this.during === 'debit') {
        await row.lock();
        await chargeKillingHolder(m, w, this.merchant, body, label, { reached: stepWaits, afterKill: row.unlock });
      } else {
        await chargeKillingHolder(m, w, this.merchant, body, label, {
          beforeKill: async () => {
            await row.lock();
            return stepWaits();
          },
          afterKill: row.unlock,
        });
      }
    } finally {
      await row.close();
    }
  }
  toString = () => `crashDuringWalletCharge(${this.merchant}, during ${this.during})`;
}

/**
 * A wallet's row, locked (`FOR UPDATE`) by a connection of the test's own until `unlock`: every ledger step of that
 * wallet waits; `waiter` sees `minimum` of them waiting (pg_stat_activity) within 6 s.
 */
async function lockableRow(w: World, merchant: MerchantName, walletId: string) {
  const locker = await w.db.connect();
  const pid = (locker as unknown as { processID: number }).processID;
  let locked = false;
  const unlock = async () => {
    if (locked) await locker.query('ROLLBACK');
    locked = false;
  };
  return {
    lock: async () => {
      await locker.query('BEGIN');
      locked = true;
      await locker.query('SELECT 1 FROM wallets WHERE merchant_id = $1 AND wallet_id = $2 FOR UPDATE', [
        w.merchant(merchant).id,
        walletId,
      ]);
    },
    unlock,
    waiter: (what: string, minimum: number) =>
      eventually(
        what,
        async () => {
          const { rows } = await w.db.query<{ n: number }>(
            `SELECT count(*)::int AS n FROM pg_stat_activity
              WHERE datname = current_database() AND wait_event_type = 'Lock' AND pid <> $1`,
            [pid],
          );
          return (rows[0]?.n ?? 0) >= minimum;
        },
        6_000,
        20,
      ).then(
        () => true,
        () => false,
      ),
    close: async () => {
      await unlock().catch(() => undefined);
      locker.release();
    },
  };
}

/** How much of a payment a wallet refund asks: within the wallet's part, past it into the card's, all, or more. */
export type WalletRefundMode = 'wallet' | 'spill' | 'all' | 'over';

/**
 * A refund of a payment with a wallet part, sized from its current view: the wallet gets its captured part back first,
 * the card the rest; more than both is 422 `amount_exceeded` (when no operation of it is running).
 */
export class WalletRefund implements Cmd {
  constructor(
    readonly index: number,
    readonly mode: WalletRefundMode,
    readonly fraction: number,
    readonly fault: FaultSpec | undefined,
  ) {}
  check = (m: Readonly<Model>) => m.payments.some(hasWallet);
  async run(m: Model, w: World) {
    const p = pickWalletPayment(m, this.index, (x) => x.view?.status === 'succeeded');
    const read = await w.api('GET', `/v1/payments/${p.key}`, { merchant: p.merchant });
    const view = read.body as unknown as PaymentView;
    if (read.status === 200) see(p, view);
    const walletLeft = view.wallet?.status === 'captured' ? view.wallet.amount - view.wallet.refunded : 0;
    const cardLeft = Math.max(0, (view.amountCaptured ?? 0) - (view.amountRefunded ?? 0));
    const part = (n: number) => Math.max(1, Math.floor(n * this.fraction));
    const amount = {
      wallet: part(walletLeft),
      spill: walletLeft + part(cardLeft),
      all: Math.max(1, walletLeft + cardLeft),
      over: walletLeft + cardLeft + 1,
    }[this.mode];
    const disarm = await arm(w, this.fault, 'refund', p.body.orderId);
    const key = fresh(m, 'ref');
    const label = `${this} [${p.merchant}/${p.key} wallet left ${walletLeft}, card left ${cardLeft}: ${amount}]`;
    const r = await sendOp(m, w, p, 'refund', key, { amount }, label);
    // Refused unsent, or the wallet takes it all: no card refund reached the provider, its fault must not outlive it.
    if (refusedUnsent(r) || amount <= walletLeft) await disarm();
    assertOneOf(m, label, r, OP_ANSWERS);
    m.ops.push({
      kind: 'refund',
      merchant: p.merchant,
      paymentKey: p.key,
      key,
      body: { amount },
      consumed: accepted(r),
    });
    const idle = !(view.operations ?? []).some((o) => o.state === 'running');
    if (this.mode === 'over' && idle && view.status === 'succeeded' && r.status < 300)
      violation(m, `${label}: more than the payment has left, yet ${describeAnswer(r)}`);
  }
  toString = () =>
    `walletRefund(#${this.index}, ${this.mode}${this.mode === 'wallet' || this.mode === 'spill' ? ` ${this.fraction}` : ''})${describeFault(this.fault)}`;
}

/** The same key and body of a payment with a wallet part again: the same payment and wallet part, no second hold. */
export class RepeatWalletCharge implements Cmd {
  constructor(readonly index: number) {}
  check = (m: Readonly<Model>) => m.payments.some(hasWallet);
  async run(m: Model, w: World) {
    const p = pickWalletPayment(m, this.index, () => true);
    const r = await w.api('POST', '/v1/payments', { merchant: p.merchant, key: p.key, body: p.body });
    const label = `${this} [${p.merchant}/${p.key}]`;
    m.trace.push(`${label} -> ${describeAnswer(r)}`);
    assertOneOf(m, label, r, MOVING);
    m.seen.push(seenOf(m, 'charge', p.merchant, p.key, p.key, p.body.amount.value, r));
    const view = r.body as unknown as PaymentView;
    if (view.key !== p.key) violation(m, `${label}: answered another payment ${String(view.key)}`);
    if (r.headers.get('idempotent-replayed') !== 'true') violation(m, `${label}: no Idempotent-Replayed header`);
    if (view.wallet?.walletId !== p.body.wallet?.walletId || view.wallet?.amount !== p.body.wallet?.amount)
      violation(
        m,
        `${label}: the repeat shows wallet part ${JSON.stringify(view.wallet)}, asked ${JSON.stringify(p.body.wallet)}`,
      );
    see(p, view);
    const holds = await w.db.query('SELECT seq FROM wallet_entries WHERE merchant_id = $1 AND operation_id = $2', [
      w.merchant(p.merchant).id,
      `hold:${w.merchant(p.merchant).id}:${p.key}`,
    ]);
    if (holds.rows.length > 1) violation(m, `${label}: the payment is held ${holds.rows.length} times`);
  }
  toString = () => `repeatWalletCharge(#${this.index})`;
}
