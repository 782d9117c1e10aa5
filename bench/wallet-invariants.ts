/**
 * The wallet checks (issue 23) of the money model (test/model: after a sequence settled, over the ledger's own tables
 * read with SQL) and of the soak (bench/soak-wallets.ts: after quiescence, over the wallets and entries read through the
 * API), against the provider's ledger. Pure over what was read, so each rule can be shown to fail on a doctored input
 * (test/model/wallet-invariants.test.ts, test/bench/soak-wallets.test.ts):
 *  W1. every wallet's balance and held equal the sums of its entries (balance = credits + refunds - captures, held =
 *      holds - captures - releases), each entry's balance_after/held_after (where read) is the running sum at that
 *      entry, and no operation id appears twice;
 *  W2. never a negative available (balance - held) nor held, after any entry;
 *  W3. a payment's wallet part is held once for its amount, and then: captured exactly once (for the held amount) when
 *      the payment succeeded, released (never captured) when it was declined, failed or voided, neither while its
 *      outcome is open; every entry of a payment on the sequence's wallets is a payment's the sequence knows;
 *  W4. refunds to the wallet never exceed what its part captured, and none without a capture;
 *  W5. a wallet-only payment, and a payment declined `wallet_insufficient_funds`, never reached the provider (no request
 *      under its create key); the provider's create of a split payment is for the card part only;
 *  W6. the payment view's wallet part (amount, status, refunded) is what the entries say;
 *  W7. refunds go to the wallet first: a refund the provider did returned the rest of its request to the wallet, and
 *      once the card was refunded the wallet's captured part was all refunded.
 */
import type pg from 'pg';
import type { InvariantEffect } from './money-invariant';

/** A `wallets` row. */
export interface LedgerWallet {
  readonly merchantId: string;
  readonly walletId: string;
  readonly balance: number;
  readonly held: number;
}

/** A `wallet_entries` row. */
export interface LedgerEntry {
  readonly seq: number;
  readonly merchantId: string;
  readonly walletId: string;
  readonly operationId: string;
  readonly kind: 'credit' | 'hold' | 'capture' | 'release' | 'refund';
  readonly amount: number;
  readonly holdId: string | null;
  /** The running sums the table keeps (the API's entries do not show them). */
  readonly balanceAfter?: number;
  readonly heldAfter?: number;
}

/** The parts of a payment's final view the wallet checks read. */
export interface WalletCaseView {
  readonly status: string;
  readonly declineCode?: string;
  readonly failureReason?: string;
  readonly wallet?: {
    readonly walletId: string;
    readonly amount: number;
    readonly status: string;
    readonly refunded: number;
  };
}

/** One payment with a wallet part the sequence drove, as it ended. */
export interface WalletCase {
  readonly merchantId: string;
  readonly key: string;
  /** The charge's total and its wallet part (the provider is charged for the rest). */
  readonly total: number;
  readonly walletId: string;
  readonly walletAmount: number;
  readonly view: WalletCaseView;
  /** The provider key of its create. */
  readonly createKey: string;
  /** The refunds asked of it: their keys, amounts and provider keys. */
  readonly refunds: readonly { readonly key: string; readonly amount: number; readonly providerKey: string }[];
}

export interface WalletCheckInput {
  readonly wallets: readonly LedgerWallet[];
  readonly entries: readonly LedgerEntry[];
  readonly payments: readonly WalletCase[];
  /** The provider's ledger (the harness's api key). */
  readonly effects: readonly InvariantEffect[];
  readonly requests: readonly { readonly idempotency_key: string | null }[];
  /** Payment keys whose final view could not be read: their entries are not checked, nor called unknown. */
  readonly unread?: readonly { readonly merchantId: string; readonly key: string }[];
}

/**
 * One broken wallet promise, its message prefixed with its rule: `double` when money moved twice (a part held or
 * ended twice, an operation applied twice, more returned than captured), `mismatch` otherwise.
 */
export interface WalletProblem {
  readonly kind: 'double' | 'mismatch';
  readonly message: string;
}

/** The ledger's operation id of a step (src/domain/wallet-operations.ts). */
const opId = (kind: LedgerEntry['kind'], merchantId: string, key: string) => `${kind}:${merchantId}:${key}`;
const sum = (entries: readonly LedgerEntry[]) => entries.reduce((n, e) => n + e.amount, 0);
const OPEN = ['pending', 'unknown', 'needs_review', 'requires_action', 'authorized'];
const ENDED_WITHOUT_MONEY = ['declined', 'failed', 'voided'];

/** Every broken wallet promise, one line each, prefixed with its rule. */
export function checkWallets(input: WalletCheckInput): string[] {
  return walletProblems(input).map((p) => p.message);
}

/** Every broken wallet promise, with what it counts as. */
export function walletProblems(input: WalletCheckInput): WalletProblem[] {
  return [...checkBalances(input), ...input.payments.flatMap((p) => checkPayment(p, input)), ...unknownEntries(input)];
}

const mismatch = (message: string): WalletProblem => ({ kind: 'mismatch', message });
const double = (message: string): WalletProblem => ({ kind: 'double', message });

/** W1 and W2 for every wallet. */
function checkBalances({ wallets, entries }: WalletCheckInput): WalletProblem[] {
  const problems: WalletProblem[] = [];
  const byOperation = new Map<string, LedgerEntry[]>();
  for (const e of entries)
    byOperation.set(`${e.merchantId} ${e.operationId}`, [
      ...(byOperation.get(`${e.merchantId} ${e.operationId}`) ?? []),
      e,
    ]);
  for (const [, same] of byOperation)
    if (same.length > 1)
      problems.push(
        double(
          `W1: operation ${same[0]?.operationId} applied ${same.length} times: ${same.map((e) => `${e.kind} ${e.amount} on ${e.walletId}`).join(', ')}`,
        ),
      );
  for (const w of wallets) {
    const name = `wallet ${w.merchantId}/${w.walletId}`;
    const own = entries
      .filter((e) => e.merchantId === w.merchantId && e.walletId === w.walletId)
      .sort((x, y) => x.seq - y.seq);
    let balance = 0;
    let held = 0;
    for (const e of own) {
      balance += e.kind === 'credit' || e.kind === 'refund' ? e.amount : e.kind === 'capture' ? -e.amount : 0;
      held += e.kind === 'hold' ? e.amount : e.kind === 'capture' || e.kind === 'release' ? -e.amount : 0;
      const read = e.balanceAfter !== undefined || e.heldAfter !== undefined;
      if (read && (e.balanceAfter !== balance || e.heldAfter !== held))
        problems.push(
          mismatch(
            `W1: ${name}: entry ${e.seq} ${e.operationId} says balance ${e.balanceAfter} held ${e.heldAfter}, ` +
              `its entries so far sum to ${balance} and ${held}`,
          ),
        );
      if (held < 0 || balance - held < 0)
        problems.push(
          mismatch(`W2: ${name}: after entry ${e.seq} ${e.operationId} held ${held}, available ${balance - held}`),
        );
    }
    if (w.balance !== balance || w.held !== held)
      problems.push(
        mismatch(`W1: ${name} shows balance ${w.balance} held ${w.held}, its entries sum to ${balance} and ${held}`),
      );
    if (w.held < 0 || w.balance - w.held < 0)
      problems.push(mismatch(`W2: ${name} shows held ${w.held}, available ${w.balance - w.held}`));
  }
  return problems;
}

/** W3-W7 for one payment. */
function checkPayment(p: WalletCase, input: WalletCheckInput): WalletProblem[] {
  const problems: WalletProblem[] = [];
  const add = (message: string, kind: WalletProblem['kind'] = 'mismatch') => void problems.push({ kind, message });
  const name = `${p.merchantId}/${p.key} (${p.view.status}${p.view.declineCode ? ` ${p.view.declineCode}` : ''})`;
  const holdId = opId('hold', p.merchantId, p.key);
  const mine = input.entries.filter(
    (e) => e.merchantId === p.merchantId && (e.operationId === holdId || e.holdId === holdId),
  );
  const of = (kind: LedgerEntry['kind']) => mine.filter((e) => e.kind === kind);
  const [holds, captures, releases, refunds] = [of('hold'), of('capture'), of('release'), of('refund')];
  const hold = holds[0];
  const list = (es: readonly LedgerEntry[]) => es.map((e) => `${e.kind} ${e.amount}`).join(', ') || 'none';

  // W3: the hold and how it ended.
  if (holds.length > 1) add(`W3: ${name} is held ${holds.length} times: ${list(holds)}`, 'double');
  if (hold && (hold.amount !== p.walletAmount || hold.walletId !== p.walletId))
    add(`W3: ${name} holds ${hold.amount} on ${hold.walletId}, its wallet part is ${p.walletAmount} on ${p.walletId}`);
  if (captures.length + releases.length > 1)
    add(`W3: ${name}'s hold ended more than once: ${list([...captures, ...releases])}`, 'double');
  for (const c of captures)
    if (c.amount !== (hold?.amount ?? -1))
      add(`W3: ${name} captured ${c.amount} of a hold of ${hold?.amount ?? 'none'}`);
  for (const r of releases)
    if (r.amount !== (hold?.amount ?? 0))
      add(`W3: ${name} released ${r.amount} of a hold of ${hold?.amount ?? 'none'}`);
  if (p.view.status === 'succeeded' && (!hold || captures.length !== 1 || releases.length > 0))
    add(
      `W3: ${name} succeeded, so its wallet part is captured once: hold ${list(holds)}, then ${list([...captures, ...releases])}`,
    );
  if (ENDED_WITHOUT_MONEY.includes(p.view.status)) {
    if (captures.length > 0) add(`W3: ${name} took no money, yet its wallet part was captured`);
    if (hold && releases.length === 0)
      add(`W3: ${name} took no money, yet its hold of ${hold.amount} was never released`);
  }
  if (OPEN.includes(p.view.status) && captures.length + releases.length > 0)
    add(`W3: ${name} is open, so its wallet part stays held, yet: ${list([...captures, ...releases])}`);

  // W4: refunds within the captured part.
  const captured = captures.length === 1 ? (captures[0] as LedgerEntry).amount : 0;
  if (sum(refunds) > captured)
    add(
      `W4: ${name} returned ${sum(refunds)} to the wallet (${list(refunds)}), its part captured ${captured}`,
      'double',
    );

  // W5: what the provider saw.
  const createRequests = input.requests.filter((r) => r.idempotency_key === p.createKey).length;
  const cardPart = p.total - p.walletAmount;
  if (cardPart === 0 && createRequests > 0)
    add(`W5: ${name} is wallet-only, yet the provider got ${createRequests} create request(s) for it`);
  if (p.view.declineCode === 'wallet_insufficient_funds' && createRequests > 0)
    add(`W5: ${name} was declined for the wallet's funds, yet the provider got a create for it`);
  if (p.view.declineCode === 'wallet_insufficient_funds' && holds.length > 0)
    add(`W5: ${name} was declined for the wallet's funds, yet it holds ${hold?.amount}`);
  for (const e of input.effects)
    if (e.operation === 'create' && e.idempotency_key === p.createKey && e.amount !== cardPart)
      add(`W5: ${name}: the provider's create is for ${e.amount}, the card part is ${cardPart}`);

  // W6: the view is what the entries say.
  const w = p.view.wallet;
  const status = captures.length > 0 ? 'captured' : releases.length > 0 || !hold ? 'released' : 'held';
  if (w === undefined) add(`W6: ${name} shows no wallet part`);
  else {
    // A hold not applied yet (a pending payment) shows `held`: it may be held.
    const statusOk = w.status === status || (w.status === 'held' && !hold && OPEN.includes(p.view.status));
    if (w.walletId !== p.walletId || w.amount !== p.walletAmount || !statusOk || w.refunded !== sum(refunds))
      add(
        `W6: ${name} shows its wallet part ${JSON.stringify(w)}, the entries say ${status}, refunded ${sum(refunds)} ` +
          `(${list(mine)})`,
      );
  }

  // W7: refunds go to the wallet first.
  let cardRefunded = false;
  for (const r of p.refunds) {
    const share = sum(refunds.filter((e) => e.operationId === opId('refund', p.merchantId, r.key)));
    const card = input.effects.filter((e) => e.operation === 'refund' && e.idempotency_key === r.providerKey);
    for (const e of card) {
      cardRefunded = true;
      if (e.amount + share !== r.amount)
        add(`W7: ${name}: refund ${r.key} of ${r.amount} returned ${share} to the wallet and ${e.amount} to the card`);
    }
  }
  if (cardRefunded && sum(refunds) !== captured)
    add(`W7: ${name}: the card was refunded while the wallet got back ${sum(refunds)} of the ${captured} it paid`);
  return problems;
}

/**
 * W3: an entry of a payment (a hold, and the capture, release or refund of a hold) on the sequence's wallets (those of
 * its payments) that is no payment's of the sequence.
 */
function unknownEntries({ entries, payments, unread = [] }: WalletCheckInput): WalletProblem[] {
  const wallets = new Set(payments.map((p) => `${p.merchantId}/${p.walletId}`));
  const known = new Set([...payments, ...unread].map((p) => opId('hold', p.merchantId, p.key)));
  return entries
    .filter((e) => e.kind !== 'credit' && wallets.has(`${e.merchantId}/${e.walletId}`))
    .filter((e) => !known.has(e.kind === 'hold' ? e.operationId : (e.holdId ?? '')))
    .map((e) =>
      mismatch(
        e.kind === 'hold'
          ? `W3: wallet ${e.merchantId}/${e.walletId} holds ${e.amount} for ${e.operationId}, no payment of the sequence`
          : `W3: wallet ${e.merchantId}/${e.walletId} has ${e.operationId} (${e.kind} ${e.amount} of ` +
              `${e.holdId ?? 'no hold'}), no payment of the sequence`,
      ),
    );
}

/**
 * The card side of payments with a wallet part, for the money invariant (bench/money-invariant.ts), which sees the
 * provider's side only (docs/http-api.md#payments-with-a-wallet-part): a wallet-only payment is none of the provider's
 * business, a refund counts at the provider for its card share (its amount less what the wallet's entry of its key
 * took), and a view holds no refund the wallet covered entirely (the provider never saw it).
 */
export function cardSide(entries: readonly Pick<LedgerEntry, 'kind' | 'operationId' | 'amount'>[]) {
  const walletShare = new Map(entries.filter((e) => e.kind === 'refund').map((e) => [e.operationId, e.amount]));
  /** Refund `key` of a payment of `merchantId`: its card share (`amount` as is without a wallet part). */
  const refund = (merchantId: string, hasWallet: boolean, key: string, amount: number | undefined) =>
    !hasWallet || amount === undefined ? amount : amount - (walletShare.get(opId('refund', merchantId, key)) ?? 0);
  return {
    walletOnly: (total: number, part: { readonly amount: number } | undefined) => part?.amount === total,
    refund,
    /** The view without the refunds the wallet covered; `requested` answers what refund `key` asked for. */
    view<V extends { readonly operations?: readonly { readonly kind: string; readonly key: string }[] }>(
      merchantId: string,
      hasWallet: boolean,
      view: V | undefined,
      requested: (key: string) => number | undefined,
    ): V | undefined {
      if (view === undefined || !hasWallet || view.operations === undefined) return view;
      const operations = view.operations.filter(
        (o) => o.kind !== 'refund' || refund(merchantId, true, o.key, requested(o.key)) !== 0,
      );
      return { ...view, operations };
    },
  };
}

/** Reads every wallet and entry of the ledger's tables (the checks see what the database holds, not the API). */
export async function readLedger(db: pg.Pool): Promise<Pick<WalletCheckInput, 'wallets' | 'entries'>> {
  const wallets = await db.query<{ merchant_id: string; wallet_id: string; balance: string; held: string }>(
    'SELECT merchant_id, wallet_id, balance, held FROM wallets',
  );
  const entries = await db.query<{
    seq: string;
    merchant_id: string;
    wallet_id: string;
    operation_id: string;
    kind: LedgerEntry['kind'];
    amount: string;
    hold_id: string | null;
    balance_after: string;
    held_after: string;
  }>(
    `SELECT seq, merchant_id, wallet_id, operation_id, kind, amount, hold_id, balance_after, held_after
       FROM wallet_entries ORDER BY seq`,
  );
  return {
    wallets: wallets.rows.map((r) => ({
      merchantId: r.merchant_id,
      walletId: r.wallet_id,
      balance: Number(r.balance),
      held: Number(r.held),
    })),
    entries: entries.rows.map((r) => ({
      seq: Number(r.seq),
      merchantId: r.merchant_id,
      walletId: r.wallet_id,
      operationId: r.operation_id,
      kind: r.kind,
      amount: Number(r.amount),
      holdId: r.hold_id,
      balanceAfter: Number(r.balance_after),
      heldAfter: Number(r.held_after),
    })),
  };
}
