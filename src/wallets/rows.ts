/** The ledger's rows and how they read as the API's views. */
import type { WalletEntry, WalletView } from '../domain/wallets';
import type { WalletEntryKind } from '../domain/wallet-operations';

/** `wallets`, as selected (bigint arrives as a string: every value is within 2^53, a CHECK says so). */
export interface WalletRow {
  readonly merchant_id: string;
  readonly wallet_id: string;
  readonly currency: string;
  readonly balance: string;
  readonly held: string;
  readonly updated_at: Date;
}

/** `wallet_entries`, as selected. */
export interface EntryRow {
  readonly seq: string;
  readonly wallet_id: string;
  readonly operation_id: string;
  readonly kind: WalletEntryKind;
  readonly amount: string;
  readonly hold_id: string | null;
  readonly payment_key: string | null;
  readonly reason: string | null;
  readonly fingerprint: string | null;
  readonly balance_after: string;
  readonly held_after: string;
  readonly at: Date;
}

export const walletColumns = 'merchant_id, wallet_id, currency, balance, held, updated_at';
export const entryColumns =
  'seq, wallet_id, operation_id, kind, amount, hold_id, payment_key, reason, fingerprint, balance_after, held_after, at';

/** The wallet as it is. */
export function walletView(row: WalletRow): WalletView {
  const balance = Number(row.balance);
  const held = Number(row.held);
  return {
    walletId: row.wallet_id,
    merchantId: row.merchant_id,
    currency: row.currency,
    balance,
    held,
    available: balance - held,
    updatedAt: row.updated_at.toISOString(),
  };
}

/** The wallet as it was right after `entry`: what the entry's first answer said, replayed. */
export function walletViewAfter(wallet: WalletRow, entry: EntryRow): WalletView {
  return walletView({ ...wallet, balance: entry.balance_after, held: entry.held_after, updated_at: entry.at });
}

/** An entry as the API lists it. */
export function entryView(row: EntryRow): WalletEntry {
  return {
    operationId: row.operation_id,
    kind: row.kind,
    amount: Number(row.amount),
    ...(row.payment_key === null ? {} : { paymentKey: row.payment_key }),
    ...(row.reason === null ? {} : { reason: row.reason }),
    at: row.at.toISOString(),
  };
}
