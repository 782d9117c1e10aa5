/**
 * The wallet ledger: credits, two-phase debits (a hold, later captured or released, like TigerBeetle's pending
 * transfers) and refunds, each one transaction that locks the wallet row, reads its operation id under that lock and
 * writes one entry. The operation id (`<kind>:<merchant>:<key>`) is the idempotency barrier: a repeat answers what the
 * first call answered, the same id with another amount is refused before any effect, and UNIQUE(merchant, operation_id)
 * holds even for racers the lock does not order (two wallets).
 */
import { createHash } from 'node:crypto';
import type pg from 'pg';
import { GroupCommit, type Queryable, type StepOptions, isDatabaseError, withConnection } from '../db';
import type { Currency } from '../domain/money';
import { canonicalJson } from '../domain/payment';
import { WalletFailure } from '../domain/wallet-errors';
import { type WalletOperationKind, walletOperationId } from '../domain/wallet-operations';
import type { CreditRequest, WalletEntryList, WalletEntriesQuery, WalletView } from '../domain/wallets';
import { WalletError } from './errors';
import type { WalletObserver, WalletOutcome } from './observer';
import { listEntries, readWallet } from './reads';
import { type EntryRow, type WalletRow, walletView, walletViewAfter } from './rows';
import { appendEntry, entriesOf, lockWallet } from './steps';

/** A hold of `amount` on a payment's wallet part. */
export interface HoldArgs {
  readonly merchantId: string;
  readonly walletId: string;
  /** The payment's key: the hold's operation id is `hold:<merchantId>:<paymentKey>`. */
  readonly paymentKey: string;
  readonly amount: number;
  readonly currency: Currency;
}

/** What a hold did: held (now or before: `replayed`), or nothing because `available` was short. */
export type HoldResult =
  | { readonly status: 'held'; readonly replayed: boolean; readonly amount: number; readonly wallet: WalletView }
  | { readonly status: 'insufficient_funds'; readonly available: number; readonly wallet: WalletView };

/**
 * What a debit did: captured (now or before: `replayed`), or declined because `available` was short (now or before:
 * the decline is recorded, so the payment key's debit is decided once). `at`: when the ledger decided it (the entry's
 * time), the same for every caller that reads the decision back.
 */
export type DebitResult =
  | {
      readonly status: 'captured';
      readonly replayed: boolean;
      readonly amount: number;
      readonly wallet: WalletView;
      readonly at: string;
    }
  | {
      readonly status: 'insufficient_funds';
      readonly replayed: boolean;
      readonly available: number;
      readonly wallet: WalletView;
      readonly at: string;
    };

/**
 * The `reason` of the 0 release a debit declined for short funds writes: the decline, recorded under the payment's
 * key, so a later debit of it (the workflow's after the API's, or the other way round) answers the same decline even
 * if money arrived in between, and a late hold of it is refused (any release bars one, in every version of this code).
 */
const DECLINED_SHORT_FUNDS = 'insufficient_funds';

/** The payment whose hold a capture or release ends. */
export interface SettleArgs {
  readonly merchantId: string;
  readonly walletId: string;
  readonly paymentKey: string;
}

/** What a capture, release or refund did; `amount` 0 for a release that found no hold (it bars a late one). */
export interface SettleResult {
  readonly replayed: boolean;
  readonly amount: number;
  readonly wallet: WalletView;
  /**
   * A release that replayed the key's recorded decline ({@link DECLINED_SHORT_FUNDS}): its debit was declined for
   * short funds, nothing taken; the payment is declined, not a release of an unknown debit (`wallet.updatedAt`: when).
   */
  readonly declined?: true;
}

/** A refund of (part of) a payment's captured wallet part back to the wallet, under the refund's own key. */
export interface RefundArgs extends SettleArgs {
  readonly refundKey: string;
  readonly amount: number;
}

const sha256 = (value: unknown): string => createHash('sha256').update(canonicalJson(value)).digest('hex');
const refuse = (type: WalletError['type'], message: string, settledAt?: string): never => {
  throw new WalletError(type, message, settledAt);
};

/** The ledger over one pool; `observer` hears how each operation ended. */
export class WalletLedger {
  constructor(
    private readonly pool: pg.Pool,
    private readonly observer?: WalletObserver,
  ) {}

  /**
   * The same ledger (same pool, and a subclass's overrides and state: a test's faults stay armed), reporting to
   * `observer`: each process counts into its own metrics.
   */
  withObserver(observer: WalletObserver): this {
    const observed = Object.create(this) as this;
    Object.defineProperty(observed, 'observer', { value: observer });
    return observed;
  }

  /** Adds `request.amount` under the Idempotency-Key `key`; the first credit creates the wallet in its currency. */
  credit(
    merchantId: string,
    walletId: string,
    key: string,
    request: CreditRequest,
  ): Promise<{ readonly wallet: WalletView; readonly replayed: boolean }> {
    const operationId = walletOperationId('credit', merchantId, key);
    const fingerprint = sha256({ walletId, amount: request.amount, reason: request.reason });
    return this.step('credit', { merchantId, walletId }, async (db) => {
      await db.query(
        'INSERT INTO wallets (merchant_id, wallet_id, currency) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING',
        [merchantId, walletId, request.amount.currency],
      );
      const wallet = (await lockWallet(db, merchantId, walletId)) as WalletRow;
      const [earlier] = await entriesOf(db, merchantId, [operationId]);
      if (earlier !== undefined) {
        if (earlier.fingerprint !== fingerprint) refuse(WalletFailure.OperationConflict, 'key used for another credit');
        return { replayed: true, wallet: walletViewAfter(wallet, earlier) };
      }
      if (wallet.currency !== request.amount.currency) {
        refuse(WalletFailure.CurrencyMismatch, `the wallet holds ${wallet.currency}`);
      }
      const { amount, reason } = request;
      const after = await appendEntry(db, merchantId, walletId, {
        operationId,
        kind: 'credit',
        amount: amount.value,
        balanceDelta: amount.value,
        heldDelta: 0,
        fingerprint,
        ...(reason === undefined ? {} : { reason }),
      });
      return { replayed: false, wallet: walletView(after.wallet) };
    });
  }

  /** Holds `amount` (a pending debit) unless `available` is short; once per payment key. */
  hold(args: HoldArgs): Promise<HoldResult> {
    const { merchantId, paymentKey, amount, currency } = args;
    // A split payment's first task holds before its card part is called: the hold is on the answer's path.
    return this.decide(
      'hold',
      args,
      'wallet_hold',
      [amount, currency, walletOperationId('hold', merchantId, paymentKey)],
      {
        conflict: 'this payment holds another amount or wallet',
        answer: ({ row, wallet }): HoldResult =>
          row.outcome === 'insufficient_funds'
            ? { status: 'insufficient_funds', available: wallet.available, wallet }
            : { status: 'held', replayed: row.replayed, amount, wallet },
      },
    );
  }

  /**
   * Holds `amount` and captures it in one transaction: a payment the wallet pays whole. It writes the entries a hold
   * and its capture write (same operation ids), so a debit, a hold and a capture of the same payment key answer one
   * another: a repeat reads them back, a hold made before is captured, a release made before refuses it. Short funds
   * are recorded too (a 0 release, {@link DECLINED_SHORT_FUNDS}): the API and the payment's workflow both debit a
   * wallet-only payment, and whichever comes second reads the first one's decision, captured or declined.
   */
  debit(args: HoldArgs): Promise<DebitResult> {
    const { merchantId, paymentKey, amount, currency } = args;
    // The API answers a wallet-only payment from this debit: one round trip, not the six of the steps it is made of.
    const ids = (['hold', 'capture', 'release'] as const).map((kind) =>
      walletOperationId(kind, merchantId, paymentKey),
    );
    return this.decide('debit', args, 'wallet_debit', [amount, currency, ...ids, DECLINED_SHORT_FUNDS], {
      conflict: 'this payment holds another amount or wallet',
      answer: ({ row, wallet }): DebitResult => {
        const at = wallet.updatedAt;
        return row.outcome === 'insufficient_funds'
          ? { status: 'insufficient_funds', replayed: row.replayed, available: wallet.available, wallet, at }
          : { status: 'captured', replayed: row.replayed, amount, wallet, at };
      },
    });
  }

  /** Takes the held amount out of the balance: the payment's other part succeeded (or there was none). */
  capture(args: SettleArgs): Promise<SettleResult> {
    return this.settle('capture', args);
  }

  /**
   * Gives the held amount back to `available`: the payment was declined or failed. A release of a hold that never
   * applied (its attempt's outcome was unknown) records 0 and refuses that hold if it ever arrives.
   */
  release(args: SettleArgs): Promise<SettleResult> {
    return this.settle('release', args);
  }

  /** Returns `amount` of the payment's captured wallet part to the wallet, once per refund key. */
  refund(args: RefundArgs): Promise<SettleResult> {
    const { merchantId, walletId, paymentKey, amount } = args;
    const holdId = walletOperationId('hold', merchantId, paymentKey);
    const refundId = walletOperationId('refund', merchantId, args.refundKey);
    return this.step('refund', { merchantId, walletId }, async (db) => {
      const wallet = await this.locked(db, merchantId, walletId);
      const related = await entriesOf(db, merchantId, [holdId, refundId], holdId);
      const earlier = related.find((e) => e.operation_id === refundId);
      if (earlier !== undefined) {
        if (earlier.hold_id !== holdId || earlier.wallet_id !== walletId || Number(earlier.amount) !== amount) {
          refuse(WalletFailure.OperationConflict, 'refund key used for another refund');
        }
        return this.replayed(wallet, earlier);
      }
      const capture = related.find((e) => e.kind === 'capture' && e.wallet_id === walletId);
      if (capture === undefined) return refuse(WalletFailure.HoldNotFound, 'no captured hold of this payment');
      const refunded = related.filter((e) => e.kind === 'refund').reduce((sum, e) => sum + Number(e.amount), 0);
      if (refunded + amount > Number(capture.amount)) {
        refuse(WalletFailure.AmountExceeded, `at most ${Number(capture.amount) - refunded} left to refund`);
      }
      const after = await appendEntry(db, merchantId, walletId, {
        operationId: refundId,
        kind: 'refund',
        amount,
        balanceDelta: amount,
        heldDelta: 0,
        holdId,
        paymentKey,
      });
      return { replayed: false, amount, wallet: walletView(after.wallet) };
    });
  }

  /** The wallet, or undefined when this merchant has none of that id. */
  async get(merchantId: string, walletId: string): Promise<WalletView | undefined> {
    return this.step('read', 'read', (db) => readWallet(db, merchantId, walletId));
  }

  /** A page of the wallet's entries, oldest first; undefined when this merchant has no such wallet. */
  async entries(merchantId: string, walletId: string, query: WalletEntriesQuery): Promise<WalletEntryList | undefined> {
    return this.step('read', 'read', (db) => listEntries(db, merchantId, walletId, query));
  }

  /** Capture or release: ends the hold once, whichever comes first. */
  private settle(kind: 'capture' | 'release', args: SettleArgs): Promise<SettleResult> {
    const { merchantId, paymentKey } = args;
    const [holdId, ownId] = [
      walletOperationId('hold', merchantId, paymentKey),
      walletOperationId(kind, merchantId, paymentKey),
    ];
    // A split payment's first task ends its hold: on the answer's path too.
    return this.decide(kind, args, 'wallet_settle', [kind, holdId, ownId], {
      conflict: 'the hold is on another wallet',
      answer: ({ row, wallet }): SettleResult => ({
        replayed: row.replayed,
        amount: Number(row.amount),
        wallet,
        ...(row.reason === DECLINED_SHORT_FUNDS ? { declined: true as const } : {}),
      }),
    });
  }

  /**
   * A step that is one statement: `fn(merchantId, walletId, paymentKey, ...params)`, one of the functions of migrations
   * 0004 and 0005 (one round trip instead of BEGIN, lock, reads, writes, COMMIT). Refuses what they all refuse alike
   * (no wallet, another currency, the hold ended before or never was; another amount or wallet in `conflict`'s words),
   * then answers.
   */
  private decide<T>(
    kind: WalletOperationKind,
    { merchantId, walletId, paymentKey }: SettleArgs,
    fn: 'wallet_hold' | 'wallet_debit' | 'wallet_settle',
    params: readonly unknown[],
    how: { conflict: string; answer: (decision: { row: DecisionRow; wallet: WalletView }) => T },
  ): Promise<T> {
    const placeholders = Array.from({ length: params.length + 3 }, (_, i) => `$${i + 1}`).join(', ');
    return this.step(
      kind,
      { merchantId, walletId },
      async (db) => {
        const { rows } = await db.query<DecisionRow>(`SELECT * FROM ${fn}(${placeholders})`, [
          merchantId,
          walletId,
          paymentKey,
          ...params,
        ]);
        const row = rows[0] as DecisionRow;
        if (row.outcome === 'wallet_not_found') refuse(WalletFailure.WalletNotFound, 'no such wallet');
        if (row.outcome === 'currency_mismatch')
          refuse(WalletFailure.CurrencyMismatch, `the wallet holds ${row.currency}`);
        if (row.outcome === 'hold_settled') {
          const how = row.settled_by ? `the hold was ${row.settled_by}d` : 'released before it applied';
          refuse(WalletFailure.HoldSettled, how, row.settled_by ? row.at?.toISOString() : undefined);
        }
        if (row.outcome === 'hold_not_found') refuse(WalletFailure.HoldNotFound, 'no hold of this payment');
        if (row.outcome === 'operation_conflict') refuse(WalletFailure.OperationConflict, how.conflict);
        return how.answer({ row, wallet: walletOf(row, merchantId, walletId) });
      },
      { statement: true },
    );
  }

  private replayed(wallet: WalletRow, earlier: EntryRow): SettleResult {
    return { replayed: true, amount: Number(earlier.amount), wallet: walletViewAfter(wallet, earlier) };
  }

  private async locked(db: Queryable, merchantId: string, walletId: string): Promise<WalletRow> {
    return (await lockWallet(db, merchantId, walletId)) ?? refuse(WalletFailure.WalletNotFound, 'no such wallet');
  }

  /**
   * One transaction of the wallet's, shared with the other steps of that wallet waiting at the same time (group commit,
   * src/db/group-commit.ts; a read needs none), reported to the observer. A UNIQUE violation means a racer the wallet
   * lock did not order (the same operation id on another wallet) committed first: run once more, and its entry decides.
   */
  private async step<T>(
    kind: WalletOperationKind,
    wallet: { readonly merchantId: string; readonly walletId: string } | 'read',
    work: (db: Queryable) => Promise<T>,
    options: StepOptions = {},
  ): Promise<T> {
    const run = () =>
      wallet === 'read'
        ? withConnection(this.pool, work)
        : GroupCommit.of(this.pool).run(JSON.stringify([wallet.merchantId, wallet.walletId]), work, options);
    try {
      let result: T;
      try {
        result = await run();
      } catch (err) {
        if (!(isDatabaseError(err) && err.code === '23505')) throw err;
        result = await run();
      }
      this.report(kind, outcomeOf(result));
      return result;
    } catch (err) {
      this.report(kind, isDatabaseError(err) || err instanceof WalletError ? err.type : 'error');
      throw err;
    }
  }

  private report(kind: WalletOperationKind, outcome: WalletOutcome): void {
    try {
      this.observer?.onOperation(kind, outcome);
    } catch {
      // metrics never change an answer
    }
  }
}

/**
 * What the one-statement steps (`wallet_debit`, `wallet_hold`, `wallet_settle`) answer: an outcome, and for a decision
 * the wallet's balance, held and time after the deciding entry (a hold's short funds: the wallet as it is).
 */
interface DecisionRow {
  readonly outcome:
    | 'captured'
    | 'held'
    | 'settled'
    | 'insufficient_funds'
    | 'wallet_not_found'
    | 'operation_conflict'
    | 'hold_settled'
    | 'currency_mismatch'
    | 'hold_not_found';
  readonly replayed: boolean;
  readonly currency: string | null;
  readonly balance: string | null;
  readonly held: string | null;
  readonly at: Date | null;
  /** wallet_settle: the amount settled; hold_settled: by which kind (and `at`: when); a replay: its entry's reason. */
  readonly amount?: string | null;
  readonly settled_by?: string | null;
  readonly reason?: string | null;
}

/** The wallet as a decision row says it was after the deciding entry. */
function walletOf(row: DecisionRow, merchantId: string, walletId: string): WalletView {
  return walletView({
    merchant_id: merchantId,
    wallet_id: walletId,
    currency: row.currency as string,
    balance: row.balance as string,
    held: row.held as string,
    updated_at: row.at as Date,
  });
}

/** The outcome label of a step's answer. */
function outcomeOf(result: unknown): WalletOutcome {
  if (result === undefined) return 'not_found';
  const r = result as { status?: string; replayed?: boolean; entries?: unknown; walletId?: unknown };
  if (r.status === 'insufficient_funds') return 'insufficient_funds';
  if (r.replayed === true) return 'replayed';
  if (r.replayed === false) return 'applied';
  return 'read';
}
