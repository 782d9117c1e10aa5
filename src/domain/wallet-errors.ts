/**
 * Failure types of wallet operations (zod-free: workflow code branches on them). The ledger throws them, the wallet
 * activities turn them into ApplicationFailures of the same type, the API into its error answers. Insufficient funds is
 * not among them: a hold that the balance does not cover is an answer (`insufficient_funds`), like a decline.
 */
import { ErrorType } from './errors';

export const WalletFailure = {
  /** Refused before the statement or rolled back (connection refused, pool exhausted, a lost connection before COMMIT): nothing applied, a retry is safe. */
  DatabaseNotApplied: 'DatabaseNotApplied',
  /** COMMIT was sent and its answer lost: applied or not; the retry reads the operation id back before acting. */
  DatabaseOutcomeUnknown: 'DatabaseOutcomeUnknown',
  /** No wallet of that merchant with that id. */
  WalletNotFound: 'WalletNotFound',
  /** The operation's currency is not the wallet's (fixed by its first credit). */
  CurrencyMismatch: 'CurrencyMismatch',
  /** A capture, release or refund names a hold that was never applied. */
  HoldNotFound: 'HoldNotFound',
  /** The hold was already captured (a release, a second capture under another id) or released (a capture, a late hold). */
  HoldSettled: 'HoldSettled',
  /** The same operation id with another amount, wallet, payment or body: refused before any effect. */
  OperationConflict: ErrorType.IdempotencyKeyReused,
  /** A refund over what the hold's capture still allows. */
  AmountExceeded: ErrorType.AmountExceeded,
} as const;
export type WalletFailure = (typeof WalletFailure)[keyof typeof WalletFailure];

/** The failures that a retry can change: nothing was applied, or the retry settles an unknown by reading back. */
export const retryableWalletFailures: readonly WalletFailure[] = [
  WalletFailure.DatabaseNotApplied,
  WalletFailure.DatabaseOutcomeUnknown,
];

/** The failures no retry changes: the wallet activities fail at once with them. */
export const finalWalletFailures: readonly WalletFailure[] = Object.values(WalletFailure).filter(
  (t) => !retryableWalletFailures.includes(t),
);
