/**
 * The soak's wallet verdict (issue 23), pure: after quiescence the soak reads every wallet it used and its entries
 * through the API (`GET /v1/wallets/:walletId`, `GET /v1/wallets/:walletId/entries`), and holds them, each payment's
 * final view and the provider's ledger to the wallet rules every harness shares (bench/wallet-invariants.ts, W1-W7:
 * balance and held are the sums of the entries, never negative, no operation twice; a payment's wallet part held once,
 * captured once when it succeeded, released or never held when it did not, kept while open; wallet refunds within the
 * captured part and before the card's; a wallet-only or short-funds payment made no provider call, a split's card part
 * is `amount - wallet.amount`; the view's wallet part is what the entries say; no entry of a payment the soak does not
 * know) and to the soak's credits (each credit it was answered 200 for is there once, for its amount, and no other).
 * Money moved twice counts as double effects, anything else as mismatches.
 */
import { providerIdempotencyKey } from '../src/activities/keys';
import { walletOperationId } from '../src/domain/wallet-operations';
import type { WalletEntryKind } from '../src/domain/wallet-operations';
import type { InvariantEffect } from './money-invariant';
import { type LedgerEntry, type WalletCase, type WalletCaseView, walletProblems } from './wallet-invariants';

/** A payment's wallet part, as the charge asked it. */
export interface SoakWalletPart {
  readonly walletId: string;
  readonly amount: number;
}

/** One entry as `GET /v1/wallets/:walletId/entries` shows it. */
export interface SoakWalletEntry {
  readonly operationId: string;
  readonly kind: WalletEntryKind;
  readonly amount: number;
  readonly paymentKey?: string;
}

/** One wallet the soak used, read after quiescence: the wallet (or why not) and all its entries, oldest first. */
export interface SoakWalletRead {
  readonly walletId: string;
  readonly wallet: { readonly balance: number; readonly held: number } | { readonly error: string };
  readonly entries: readonly SoakWalletEntry[];
}

/** A credit the soak asked for, and the status of its last answer. */
export interface SoakCredit {
  readonly walletId: string;
  readonly key: string;
  readonly amount: number;
  readonly status: number;
}

/** A payment the soak charged with a wallet part, as it ended. */
export interface SoakWalletPayment {
  readonly key: string;
  /** The charge's whole amount. */
  readonly total: number;
  readonly wallet: SoakWalletPart;
  /** Its final view; undefined when it could not be read (the soak verdict counts it stuck). */
  readonly view: WalletCaseView | undefined;
  /** The refunds asked of it (key and whole amount). */
  readonly refunds: readonly { readonly key: string; readonly amount: number }[];
}

export interface SoakWalletInput {
  readonly merchantId: string;
  readonly wallets: readonly SoakWalletRead[];
  readonly credits: readonly SoakCredit[];
  /** Every payment with a wallet part whose charge was not refused (a refused one must have no entry). */
  readonly payments: readonly SoakWalletPayment[];
  readonly ledger: {
    readonly effects: readonly InvariantEffect[];
    readonly requests: readonly { readonly idempotency_key: string | null }[];
  };
}

export interface SoakWalletVerdict {
  readonly doubleEffects: number;
  readonly mismatches: number;
  /** One line per problem, `double: ...` or `mismatch: ...`, naming the wallet or payment. */
  readonly problems: readonly string[];
}

/** The wallets' entries in the shape of the ledger's rows (in order; a settle's or refund's hold from its payment). */
export function ledgerEntriesOf(merchantId: string, wallets: readonly SoakWalletRead[]): LedgerEntry[] {
  let seq = 0;
  return wallets.flatMap((w) =>
    w.entries.map((e) => ({
      seq: ++seq,
      merchantId,
      walletId: w.walletId,
      operationId: e.operationId,
      kind: e.kind,
      amount: e.amount,
      holdId:
        e.kind !== 'credit' && e.kind !== 'hold' && e.paymentKey !== undefined
          ? walletOperationId('hold', merchantId, e.paymentKey)
          : null,
    })),
  );
}

/** Checks the wallets the soak used; see the module's comment. */
export function checkSoakWallets(input: SoakWalletInput): SoakWalletVerdict {
  const { merchantId } = input;
  const entries = ledgerEntriesOf(merchantId, input.wallets);
  const problems: { kind: 'double' | 'mismatch'; message: string }[] = [];
  const wallets = input.wallets.flatMap((w) => {
    if ('error' in w.wallet) {
      problems.push({ kind: 'mismatch', message: `wallet ${w.walletId} could not be read: ${w.wallet.error}` });
      return [];
    }
    return [{ merchantId, walletId: w.walletId, balance: w.wallet.balance, held: w.wallet.held }];
  });
  problems.push(...checkCredits(input, entries));
  const read = input.payments.filter((p) => p.view !== undefined);
  const cases: WalletCase[] = read.map((p) => ({
    merchantId,
    key: p.key,
    total: p.total,
    walletId: p.wallet.walletId,
    walletAmount: p.wallet.amount,
    view: p.view as WalletCaseView,
    createKey: providerIdempotencyKey(merchantId, 'create', p.key),
    refunds: p.refunds.map((r) => ({ ...r, providerKey: providerIdempotencyKey(merchantId, 'refund', r.key) })),
  }));
  problems.push(
    ...walletProblems({
      wallets,
      entries,
      payments: cases,
      unread: input.payments.filter((p) => p.view === undefined).map((p) => ({ merchantId, key: p.key })),
      effects: input.ledger.effects,
      requests: input.ledger.requests,
    }),
  );
  return {
    doubleEffects: problems.filter((p) => p.kind === 'double').length,
    mismatches: problems.filter((p) => p.kind === 'mismatch').length,
    problems: problems.map((p) => `${p.kind}: ${p.message}`),
  };
}

/** Each credit answered 200 is an entry of its wallet, for its amount; no credit entry the soak did not ask for. */
function checkCredits(input: SoakWalletInput, entries: readonly LedgerEntry[]) {
  const problems: { kind: 'mismatch'; message: string }[] = [];
  const asked = new Map(input.credits.map((c) => [walletOperationId('credit', input.merchantId, c.key), c]));
  for (const [operationId, c] of asked) {
    const found = entries.filter((e) => e.operationId === operationId);
    if (c.status === 200 && found.length === 0)
      problems.push({
        kind: 'mismatch',
        message: `wallet ${c.walletId}: credit ${c.key} of ${c.amount} was answered 200, yet it has no entry`,
      });
    for (const e of found)
      if (e.walletId !== c.walletId || e.amount !== c.amount)
        problems.push({
          kind: 'mismatch',
          message: `wallet ${e.walletId}: credit ${c.key} applied ${e.amount}, asked ${c.amount} on ${c.walletId}`,
        });
  }
  for (const e of entries)
    if (e.kind === 'credit' && !asked.has(e.operationId))
      problems.push({
        kind: 'mismatch',
        message: `wallet ${e.walletId}: a credit of ${e.amount} (${e.operationId}) the soak never asked for`,
      });
  return problems;
}

/** How the soak's wallet payments ended, for its report: shapes, outcomes, wallet refunds. */
export function walletSummaryLine(payments: readonly SoakWalletPayment[], refused: number): string {
  const only = payments.filter((p) => p.wallet.amount === p.total).length;
  const outcome = (p: SoakWalletPayment): string => {
    if (p.view === undefined) return 'unread';
    if (p.view.declineCode === 'wallet_insufficient_funds') return 'insufficient funds';
    const why = p.view.declineCode ?? p.view.failureReason;
    return why === undefined ? p.view.status : `${p.view.status} (${why})`;
  };
  const outcomes = new Map<string, number>();
  for (const p of payments) outcomes.set(outcome(p), (outcomes.get(outcome(p)) ?? 0) + 1);
  const refunded = payments.filter((p) => (p.view?.wallet?.refunded ?? 0) > 0);
  const back = refunded.reduce((n, p) => n + (p.view?.wallet?.refunded ?? 0), 0);
  return (
    `wallet payments: ${payments.length + refused} (${payments.length - only} split, ${only} wallet-only` +
    `${refused > 0 ? `, ${refused} refused` : ''}): ${[...outcomes].map(([k, n]) => `${k} ${n}`).join(', ')}; ` +
    `${refunded.length} refunded to their wallet (${back} in all)`
  );
}
