/** What the ledger reports about each operation, for metrics (`payments_wallet_operations_total{kind,outcome}`). */
import type { WalletOperationKind } from '../domain/wallet-operations';

/**
 * How one ledger operation ended: `applied` (written now), `replayed` (its operation id was already applied: the same
 * answer again), `insufficient_funds` (a hold the balance did not cover), `not_found` (a read of no wallet), or the
 * failure type of a refusal or database failure (`IdempotencyKeyReused`, `DatabaseNotApplied`, ...).
 */
export type WalletOutcome = 'applied' | 'replayed' | 'insufficient_funds' | 'read' | 'not_found' | (string & {});

/** Hears every ledger operation once, after it ended; a hook that throws never changes the answer. */
export interface WalletObserver {
  onOperation(kind: WalletOperationKind, outcome: WalletOutcome): void;
}
