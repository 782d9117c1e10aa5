/**
 * The wallets' side of the bench's money check (issue 23): read back from the `wallets` and `wallet_entries` tables
 * after the scenario's payments settled, every wallet's balance and held amount must be the sum of its entries, its
 * balance what it was funded minus the payments' wallet parts, and each payment must have held and captured its wallet
 * part exactly once (never released). {@link checkWalletLedger} is pure; {@link readWalletLedger} reads the tables.
 */
import type pg from 'pg';
import type { WalletPart } from './load';

/** A `wallets` row as the check reads it. */
export interface WalletRead {
  readonly walletId: string;
  readonly balance: number;
  readonly held: number;
}

/** A `wallet_entries` row as the check reads it. */
export interface WalletEntryRead {
  readonly walletId: string;
  readonly kind: string;
  readonly amount: number;
  readonly paymentKey: string | null;
}

/** A payment the scenario drove with a wallet part (its Idempotency-Key is the entries' payment key). */
export interface WalletPayment {
  readonly key: string;
  readonly wallet: WalletPart;
}

/** What the check is held against: one merchant's wallets and entries, its payments, what each wallet was funded. */
export interface WalletLedgerInput {
  readonly wallets: readonly WalletRead[];
  readonly entries: readonly WalletEntryRead[];
  readonly payments: readonly WalletPayment[];
  /** Credits the scenario made, per wallet id. */
  readonly funded: ReadonlyMap<string, number>;
}

const sumOf = (entries: readonly WalletEntryRead[], ...kinds: string[]): number =>
  entries.filter((e) => kinds.includes(e.kind)).reduce((n, e) => n + e.amount, 0);

/** Every broken promise, one line each; empty: the wallets hold. */
export function checkWalletLedger({ wallets, entries, payments, funded }: WalletLedgerInput): string[] {
  const problems: string[] = [];
  for (const walletId of funded.keys()) {
    if (!wallets.some((w) => w.walletId === walletId)) problems.push(`wallet ${walletId} was funded but is missing`);
  }
  for (const w of wallets) {
    const own = entries.filter((e) => e.walletId === w.walletId);
    const balance = sumOf(own, 'credit', 'refund') - sumOf(own, 'capture');
    const held = sumOf(own, 'hold') - sumOf(own, 'capture', 'release');
    if (w.balance !== balance) problems.push(`wallet ${w.walletId}: balance ${w.balance} != its entries' ${balance}`);
    if (w.held !== held) problems.push(`wallet ${w.walletId}: held ${w.held} != its entries' ${held}`);
    if (w.held !== 0) problems.push(`wallet ${w.walletId}: ${w.held} still held after every payment settled`);
    const parts = payments.filter((p) => p.wallet.walletId === w.walletId).reduce((n, p) => n + p.wallet.amount, 0);
    const expected = (funded.get(w.walletId) ?? 0) - parts;
    if (w.balance !== expected) {
      problems.push(
        `wallet ${w.walletId}: balance ${w.balance} != funded ${funded.get(w.walletId) ?? 0} - parts ${parts}`,
      );
    }
  }
  const byKey = new Map<string, WalletEntryRead[]>();
  for (const e of entries) {
    if (e.paymentKey === null) continue;
    byKey.set(e.paymentKey, [...(byKey.get(e.paymentKey) ?? []), e]);
  }
  const keys = new Set(payments.map((p) => p.key));
  for (const key of byKey.keys()) {
    if (!keys.has(key)) problems.push(`entries of payment ${key}, which the scenario never sent`);
  }
  for (const p of payments) {
    const own = byKey.get(p.key) ?? [];
    const of = (kind: string) => own.filter((e) => e.kind === kind);
    for (const kind of ['hold', 'capture']) {
      const found = of(kind);
      if (found.length !== 1) {
        problems.push(`payment ${p.key}: ${found.length} ${kind} entries, not 1`);
        continue;
      }
      const [e] = found as [WalletEntryRead];
      if (e.walletId !== p.wallet.walletId || e.amount !== p.wallet.amount) {
        problems.push(
          `payment ${p.key}: ${kind} of ${e.amount} on ${e.walletId}, not ${p.wallet.amount} on ${p.wallet.walletId}`,
        );
      }
    }
    if (of('release').length > 0) problems.push(`payment ${p.key}: its hold was released, yet it succeeded`);
  }
  return problems;
}

/** One merchant's wallets and entries as they are now. */
export async function readWalletLedger(
  pool: pg.Pool,
  merchantId: string,
): Promise<Pick<WalletLedgerInput, 'wallets' | 'entries'>> {
  const wallets = await pool.query<{ wallet_id: string; balance: string; held: string }>(
    'SELECT wallet_id, balance, held FROM wallets WHERE merchant_id = $1',
    [merchantId],
  );
  const entries = await pool.query<{ wallet_id: string; kind: string; amount: string; payment_key: string | null }>(
    'SELECT wallet_id, kind, amount, payment_key FROM wallet_entries WHERE merchant_id = $1 ORDER BY seq',
    [merchantId],
  );
  return {
    wallets: wallets.rows.map((r) => ({ walletId: r.wallet_id, balance: Number(r.balance), held: Number(r.held) })),
    entries: entries.rows.map((r) => ({
      walletId: r.wallet_id,
      kind: r.kind,
      amount: Number(r.amount),
      paymentKey: r.payment_key,
    })),
  };
}

/**
 * Waits (bounded) until the merchant's holds are all settled: a first answer `succeeded` may come before the capture
 * (its own activity, docs/http-api.md#payments-with-a-wallet-part). Answers whether they were, in time.
 */
export async function waitWalletsSettled(
  pool: pg.Pool,
  merchantId: string,
  holds: number,
  timeoutMs: number,
): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const { rows } = await pool.query<{ n: string }>(
      `SELECT count(*) AS n FROM wallet_entries WHERE merchant_id = $1 AND kind IN ('capture', 'release')`,
      [merchantId],
    );
    if (Number(rows[0]?.n ?? 0) >= holds) return true;
    if (Date.now() >= deadline) return false;
    await new Promise((r) => setTimeout(r, 100));
  }
}
