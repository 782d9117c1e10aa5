/**
 * The statements every wallet step is made of, run inside one transaction (src/db/transaction.ts): lock the wallet
 * row, read the entries of the operation under that lock, write one entry and the wallet together.
 */
import type { Queryable } from '../db';
import type { WalletEntryKind } from '../domain/wallet-operations';
import { type EntryRow, type WalletRow, entryColumns, walletColumns } from './rows';

/**
 * The wallet row, locked until the transaction ends: every step of one wallet waits here for the one before it, so
 * what it reads next (balance, held, the entries of its operation) cannot change under it.
 */
export async function lockWallet(db: Queryable, merchantId: string, walletId: string): Promise<WalletRow | undefined> {
  const { rows } = await db.query<WalletRow>(
    `SELECT ${walletColumns} FROM wallets WHERE merchant_id = $1 AND wallet_id = $2 FOR UPDATE`,
    [merchantId, walletId],
  );
  return rows[0];
}

/**
 * The merchant's entries with one of `operationIds`, or settling or refunding the hold `holdId`. Read after
 * {@link lockWallet}: a statement of its own, so it sees what the step that held the lock before committed.
 */
export async function entriesOf(
  db: Queryable,
  merchantId: string,
  operationIds: readonly string[],
  holdId: string | null = null,
): Promise<EntryRow[]> {
  const { rows } = await db.query<EntryRow>(
    `SELECT ${entryColumns} FROM wallet_entries
      WHERE merchant_id = $1 AND (operation_id = ANY($2::text[]) OR hold_id = $3) ORDER BY seq`,
    [merchantId, operationIds, holdId],
  );
  return rows;
}

/** One new entry, as {@link appendEntry} writes it. */
export interface NewEntry {
  readonly operationId: string;
  readonly kind: WalletEntryKind;
  readonly amount: number;
  /** What the entry adds to the balance and to what is held (negative: takes away). */
  readonly balanceDelta: number;
  readonly heldDelta: number;
  readonly holdId?: string;
  readonly paymentKey?: string;
  readonly reason?: string;
  readonly fingerprint?: string;
}

/**
 * Changes the wallet and appends the entry in one statement; the wallet's CHECK constraints refuse a write that would
 * leave `available` below 0 (the step checked it already: this is the last word, not the answer).
 */
export async function appendEntry(
  db: Queryable,
  merchantId: string,
  walletId: string,
  e: NewEntry,
): Promise<{ wallet: WalletRow; entry: EntryRow }> {
  const { rows } = await db.query<EntryRow & { updated_at: Date; currency: string }>(
    `WITH w AS (
       UPDATE wallets SET balance = balance + $3, held = held + $4, updated_at = now()
        WHERE merchant_id = $1 AND wallet_id = $2
       RETURNING merchant_id, wallet_id, currency, balance, held, updated_at)
     INSERT INTO wallet_entries (merchant_id, wallet_id, operation_id, kind, amount, hold_id, payment_key, reason,
                                 fingerprint, balance_after, held_after)
     SELECT w.merchant_id, w.wallet_id, $5, $6, $7, $8, $9, $10, $11, w.balance, w.held FROM w
     RETURNING ${entryColumns}, (SELECT updated_at FROM w), (SELECT currency FROM w)`,
    [
      merchantId,
      walletId,
      e.balanceDelta,
      e.heldDelta,
      e.operationId,
      e.kind,
      e.amount,
      e.holdId ?? null,
      e.paymentKey ?? null,
      e.reason ?? null,
      e.fingerprint ?? null,
    ],
  );
  const entry = rows[0];
  if (entry === undefined) throw new TypeError(`appendEntry: wallet ${walletId} vanished under its lock`);
  return {
    entry,
    wallet: {
      merchant_id: merchantId,
      wallet_id: walletId,
      currency: entry.currency,
      balance: entry.balance_after,
      held: entry.held_after,
      updated_at: entry.updated_at,
    },
  };
}
