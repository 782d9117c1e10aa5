/**
 * Wallet operations without zod (workflow code imports this): their kinds, the operation ids derived from a payment's
 * scope, and the activity options of each step. An operation id is the ledger's idempotency key: every retry of an
 * activity, and the activity after a worker crash, sends the same id, and the ledger applies it once.
 */
import type { ActivityOptions, RetryPolicy } from '@temporalio/common';
import { finalWalletFailures } from './wallet-errors';

/** What an entry records: money in (credit, refund), a pending debit (hold) and how it ends (capture, release). */
export const walletEntryKinds = ['credit', 'hold', 'capture', 'release', 'refund'] as const;
export type WalletEntryKind = (typeof walletEntryKinds)[number];

/**
 * The ledger's operations as metrics count them (`payments_wallet_operations_total{kind}`): the entries, a debit (a
 * hold and its capture in one transaction) and a read.
 */
export type WalletOperationKind = WalletEntryKind | 'debit' | 'read';

/**
 * `<kind>:<merchantId>:<key>`: a credit's id from its Idempotency-Key, a hold's, capture's and release's from the
 * payment's key, a refund's from the refund's key. One scope per intent, as workflow ids are (docs/architecture.md).
 */
export const walletOperationId = (kind: WalletEntryKind, merchantId: string, key: string): string =>
  `${kind}:${merchantId}:${key}`;

/**
 * What the provider is charged for a charge request: its amount less its wallet part (0: the wallet pays it all and
 * no provider call is made). Structural, so workflow code uses it without the request's schema.
 */
export const providerAmountOf = (req: {
  readonly amount: { readonly value: number };
  readonly wallet?: { readonly amount: number } | undefined;
}): number => req.amount.value - (req.wallet?.amount ?? 0);

const retry: RetryPolicy = {
  initialInterval: '200ms',
  backoffCoefficient: 2,
  maximumInterval: '10s',
  nonRetryableErrorTypes: [...finalWalletFailures],
};

/**
 * Activity options of each wallet step: an attempt is bounded (pool wait + a few statements of at most
 * DATABASE_STATEMENT_TIMEOUT_MS), and so is the whole step. A hold gives up after a minute of database trouble (its
 * payment is then refused, and releases whatever an unknown attempt may have held), and so does a wallet-only
 * payment's debit (a release then decides whether it took the money); a capture, release or refund must happen
 * eventually (money is held until it does), so it keeps trying for a day; a read is worth ten seconds.
 */
export const walletActivityOptions = {
  hold: { startToCloseTimeout: '15s', scheduleToCloseTimeout: '1m', retry },
  /**
   * The wallet-only payment's capture in its first workflow task (a local activity, like the hold): a minute, as the
   * hold; past it the payment's settlement captures with the `settle` budget.
   */
  firstCapture: { startToCloseTimeout: '15s', scheduleToCloseTimeout: '1m', retry },
  settle: { startToCloseTimeout: '15s', scheduleToCloseTimeout: '1d', retry: { ...retry, maximumInterval: '1m' } },
  read: { startToCloseTimeout: '5s', scheduleToCloseTimeout: '10s', retry },
} as const satisfies Record<string, ActivityOptions>;
