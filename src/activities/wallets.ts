/**
 * The wallet activities: thin steps over the ledger (src/wallets), built like the provider activities. Each is
 * idempotent by its operation id (`hold:<merchant>:<paymentKey>`, ...), so a retry after a lost COMMIT answer or a
 * worker that died after its COMMIT reads the operation back and answers what the first attempt did. Failures are typed
 * ApplicationFailures: `DatabaseNotApplied` and `DatabaseOutcomeUnknown` retry (bounded by the step's deadline, see
 * `walletActivityOptions`); the ledger's refusals never do. Insufficient funds is an answer, not a failure.
 */
import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import type { Logger } from 'pino';
import type { WalletView } from '../domain/wallets';
import type { WalletOperationKind } from '../domain/wallet-operations';
import { keyHash } from '../providers/logging';
import type { DebitResult, HoldArgs, HoldResult, RefundArgs, SettleArgs, SettleResult, WalletLedger } from '../wallets';
import { isWalletError } from '../wallets';
import { isDatabaseError } from '../db';

/** What the wallet activities need. */
export interface WalletActivityDeps {
  readonly ledger: WalletLedger;
  readonly logger: Logger;
}

/** A wallet by its owner and id. */
export interface WalletRef {
  readonly merchantId: string;
  readonly walletId: string;
}

/**
 * The ledger's failure as the activity's: the same type; final unless a retry can change it. Its detail says when it
 * failed (`at`, this worker's clock), so a payment that fails by it takes that time in every replay.
 */
export function toWalletFailure(err: unknown): unknown {
  const at = new Date().toISOString();
  if (isDatabaseError(err)) {
    return ApplicationFailure.create({
      type: err.type,
      message: err.message,
      nonRetryable: false,
      cause: err,
      details: [{ at }],
    });
  }
  if (isWalletError(err)) {
    return ApplicationFailure.create({
      type: err.type,
      message: err.message,
      nonRetryable: true,
      cause: err,
      // When the hold was settled (a late step's answer carries the decision's time).
      details: [{ ...(err.settledAt === undefined ? {} : { settledAt: err.settledAt }), at }],
    });
  }
  return err;
}

/** A hold's answer, and when the ledger gave it (this worker's clock): short funds decline the payment at that time. */
export type TimedHoldResult = HoldResult & { readonly at?: string };

/** The wallet activities over one ledger. */
export function createWalletActivities({ ledger, logger }: WalletActivityDeps) {
  const step = async <T>(kind: WalletOperationKind, scope: string, run: () => Promise<T>): Promise<T> => {
    const { attempt } = Context.current().info;
    // A hash of the scope correlates attempts; the merchant's wallet and payment keys stay out of the log.
    const fields = { walletOperation: kind, scopeHash: keyHash(scope), attempt };
    try {
      const result = await run();
      logger.debug({ ...fields, outcome: outcomeOf(result) }, 'wallet operation');
      return result;
    } catch (err) {
      const failure = toWalletFailure(err);
      logger.warn({ ...fields, outcome: (failure as { type?: string }).type ?? 'error' }, 'wallet operation failed');
      throw failure;
    }
  };
  return {
    /** Holds a payment's wallet part (once per payment key); `insufficient_funds` when the wallet cannot cover it. */
    holdWallet: async (args: HoldArgs): Promise<TimedHoldResult> => ({
      ...(await step('hold', `${args.merchantId}:${args.paymentKey}`, () => ledger.hold(args))),
      at: new Date().toISOString(),
    }),
    /** Holds and captures a wallet-only payment in one transaction (once per payment key). */
    debitWallet: (args: HoldArgs): Promise<DebitResult> =>
      step('debit', `${args.merchantId}:${args.paymentKey}`, () => ledger.debit(args)),
    /** Captures the payment's hold: its other part succeeded, or it had none. */
    captureWalletHold: (args: SettleArgs): Promise<SettleResult> =>
      step('capture', `${args.merchantId}:${args.paymentKey}`, () => ledger.capture(args)),
    /** Releases the payment's hold (declined, failed, or a hold whose outcome stayed unknown). */
    releaseWalletHold: (args: SettleArgs): Promise<SettleResult> =>
      step('release', `${args.merchantId}:${args.paymentKey}`, () => ledger.release(args)),
    /** Returns part of the payment's captured wallet part to the wallet, once per refund key. */
    refundToWallet: (args: RefundArgs): Promise<SettleResult> =>
      step('refund', `${args.merchantId}:${args.refundKey}`, () => ledger.refund(args)),
    /** The wallet as it is now, or null when the merchant has none of that id. */
    readWallet: async (args: WalletRef): Promise<WalletView | null> =>
      (await step('read', `${args.merchantId}:${args.walletId}`, () => ledger.get(args.merchantId, args.walletId))) ??
      null,
  };
}

/** The wallet activities, as workflows import their types. */
export type WalletActivities = ReturnType<typeof createWalletActivities>;

const outcomeOf = (result: unknown): string => {
  const r = result as { status?: string; replayed?: boolean } | undefined;
  return r?.status ?? (r?.replayed ? 'replayed' : 'done');
};
