/** Reads of the ledger: a wallet, and its entries page by page (no lock: a committed snapshot). */
import type { Queryable } from '../db';
import type { WalletEntryList, WalletEntriesQuery, WalletView } from '../domain/wallets';
import { type EntryRow, type WalletRow, entryColumns, entryView, walletColumns, walletView } from './rows';

export const defaultEntryPageSize = 50;

/** The wallet, or undefined when this merchant has none of that id (another merchant's is none of theirs). */
export async function readWallet(db: Queryable, merchantId: string, walletId: string): Promise<WalletView | undefined> {
  const { rows } = await db.query<WalletRow>(
    `SELECT ${walletColumns} FROM wallets WHERE merchant_id = $1 AND wallet_id = $2`,
    [merchantId, walletId],
  );
  return rows[0] === undefined ? undefined : walletView(rows[0]);
}

/** A page token: the last entry's sequence number, base64url. */
const encodeToken = (seq: string): string => Buffer.from(seq, 'utf8').toString('base64url');
const decodeToken = (token: string): string => {
  const seq = Buffer.from(token, 'base64url').toString('utf8');
  // A token we did not make reads as the start; it never reaches SQL as anything but a number.
  return /^\d{1,19}$/.test(seq) ? seq : '0';
};

/** The entries after the page token, oldest first (by sequence: per wallet, the order they were applied in). */
export async function listEntries(
  db: Queryable,
  merchantId: string,
  walletId: string,
  query: WalletEntriesQuery,
): Promise<WalletEntryList | undefined> {
  if ((await readWallet(db, merchantId, walletId)) === undefined) return undefined;
  const size = query.pageSize ?? defaultEntryPageSize;
  const after = query.pageToken === undefined ? '0' : decodeToken(query.pageToken);
  const { rows } = await db.query<EntryRow>(
    `SELECT ${entryColumns} FROM wallet_entries
      WHERE merchant_id = $1 AND wallet_id = $2 AND seq > $3 ORDER BY seq LIMIT $4`,
    [merchantId, walletId, after, size + 1],
  );
  const page = rows.slice(0, size);
  const last = page[page.length - 1];
  return {
    entries: page.map(entryView),
    ...(rows.length > size && last !== undefined ? { nextPageToken: encodeToken(last.seq) } : {}),
  };
}
