/**
 * `payment-workflows/database`: the payments' PostgreSQL inside an order service: `openPaymentDatabase` (pool,
 * migrations, pruning) for the workers' `database` option and the client's `clientOptions`; the wallet ledger (credit,
 * balances, entries) and its typed errors; the key-record and order-claim tables.
 */
export { openPaymentDatabase, type PaymentDatabase, type PaymentDatabaseOptions } from '../payment-database';
export {
  WalletError,
  WalletLedger,
  isDatabaseError,
  isWalletError,
  type DatabaseError,
  type WalletObserver,
} from '../wallets';
export { WalletFailure } from '../domain/wallet-errors';
export { KeyRecords, defaultKeyRetentionDays, type KeyRecord } from '../key-records';
export { OrderClaims } from '../db';
