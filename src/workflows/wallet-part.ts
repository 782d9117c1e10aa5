import {
  ApplicationFailure,
  condition,
  log,
  patched,
  proxyActivities,
  proxyLocalActivities,
} from '@temporalio/workflow';
import type { WalletActivities } from '../activities/wallets';
import type { PaymentStatus, WalletPartView } from '../domain/payment';
import { WalletFailure } from '../domain/wallet-errors';
import { walletActivityOptions } from '../domain/wallet-operations';
import type { ChargeWorkflowInput } from '../domain/workflow-inputs';
import { failedAtOf, failureType, messageOf, settledAtOf } from './failures';
import type { Handoffs } from './handoffs';
import { noHandoffs } from './handoffs';
import { PATCHES } from './patches';
import type { FirstWalletStep } from './first-create';
import { newsInTaskPatched } from './payment-news';
import { nowIso } from './payment-port';
import { type PaymentState, walletRefundable } from './payment-state';

/**
 * Patch: the payment's first wallet steps (the hold; a wallet-only payment's capture) are local activities on the
 * workflow's own worker, in its first workflow task, so the first answer waits for no other task (a wallet-only
 * payment's history: one workflow task, as a card payment's). Each is idempotent by its operation id, so a worker that
 * dies during one leaves nothing a re-run of the task cannot read back. Older runs scheduled them as activities.
 */
const WALLET_LOCAL_STEPS = PATCHES.walletLocalSteps.id;

/**
 * Patch: a split payment's hold is captured or released by a local activity as soon as its card part's first call
 * decided it, in the same workflow task, so the first answer's read waits for no activity and no other task; a step
 * that does not answer within its short budget is left to {@link settleWalletPart}. Older runs always settled it there.
 */
const WALLET_SETTLE_IN_TASK = PATCHES.walletSettleInTask.id;

/**
 * Patch: whether the split payment settles its part in the task is asked before its hold, not after its card part's
 * first call. That call may be a local activity (the local first create attempt), and a replay resolves a local
 * activity where its marker is: when its answer had come in the task after the one that recorded its marker (a busy
 * worker), the replay asked {@link WALLET_SETTLE_IN_TASK} before that task's patches were known, took the other path,
 * and failed every replay (TMPRL1100). Runs that asked it after keep asking it there.
 */
const WALLET_SETTLE_ASKED_FIRST = PATCHES.walletSettleAskedFirst.id;

/**
 * Patch: a split payment's settled wallet part stamps the view with the time the ledger settled it (the capture's or
 * release's entry, read back the same by a retry), not the workflow's clock where its answer was heard: a replay hears
 * a local activity's answer in the task of its marker, which may be earlier than the task the run heard it in, so the
 * view a replay rebuilt (and the key record it wrote) could differ from the one the API answered. Asked with
 * {@link WALLET_SETTLE_ASKED_FIRST}, before the hold.
 */
const WALLET_SETTLE_LEDGER_TIME = PATCHES.walletSettleLedgerTime.id;

/**
 * Patch: a split payment's hold, its card part's local first attempt and the hold's settlement by that attempt's
 * answer are one local activity (src/activities/wallet-first-step.ts): two round trips fewer on the first answer's
 * path. A step it could not make (nothing held, or it ended without saying) falls back to the separate steps, which read
 * back what it did. Asked with {@link WALLET_SETTLE_ASKED_FIRST}, before the hold.
 */
const WALLET_SPLIT_FIRST_STEP = PATCHES.walletSplitFirstStep.id;

/**
 * Patch: a wallet-only payment's hold and capture are one debit, one transaction in one local activity of its first
 * task (older runs held, then captured, each a local activity of that task).
 */
const WALLET_DIRECT_DEBIT = PATCHES.walletDirectDebit.id;

const { debitWallet: debitInTask } = proxyLocalActivities<WalletActivities>({
  ...walletActivityOptions.hold,
  summary: 'debit the wallet-only payment: hold and capture in one transaction (in the first task)',
});
const { holdWallet: holdWalletInTask } = proxyLocalActivities<WalletActivities>({
  ...walletActivityOptions.hold,
  summary: 'hold the payment’s wallet part before the provider is charged for the rest (in the first task)',
});
const { captureWalletHold: captureWalletOnlyInTask } = proxyLocalActivities<WalletActivities>({
  ...walletActivityOptions.firstCapture,
  summary: 'capture the wallet-only payment (in the first task)',
});
const { captureWalletHold: captureInTask, releaseWalletHold: releaseInTask } = proxyLocalActivities<WalletActivities>({
  ...walletActivityOptions.firstCapture,
  summary: 'settle the wallet part as the card part decided it (in the same task)',
});
const { holdWallet } = proxyActivities<WalletActivities>({
  ...walletActivityOptions.hold,
  summary: 'hold the payment’s wallet part before the provider is charged for the rest',
});
const { captureWalletHold } = proxyActivities<WalletActivities>({
  ...walletActivityOptions.settle,
  summary: 'capture the wallet part: the payment succeeded',
});
const { releaseWalletHold } = proxyActivities<WalletActivities>({
  ...walletActivityOptions.settle,
  summary: 'release the wallet part: the payment was declined or failed, nothing was taken',
});
const { refundToWallet } = proxyActivities<WalletActivities>({
  ...walletActivityOptions.settle,
  summary: 'return the refund’s wallet share to the wallet (before any card refund)',
});

const { releaseWalletHold: releaseUnknownDebit } = proxyActivities<WalletActivities>({
  ...walletActivityOptions.settle,
  summary: 'release the wallet-only payment’s debit whose outcome is unknown: released, or found captured',
});

/** What the wallet part needs of the payment: its input and state, and how a status change is published. */
export interface WalletPort {
  readonly input: ChargeWorkflowInput;
  readonly state: PaymentState;
  /** `at`: when what decided it happened, where a step's answer says (default: the workflow's clock). */
  transition(status: PaymentStatus, reason?: string, at?: string): void;
  publish(): void;
}

/** A wallet-only payment's first task: what it decides from the ledger, any retry of it decides the same. */
export interface WalletDebitPort extends WalletPort {
  /** Says so (payment-entity.ts): the task's news may be handed over inside it. */
  newsReproducible(): void;
}

/** Why a payment failed when its hold was refused for good; nothing was held, nothing reached the provider. */
const holdRefusals: Partial<Record<string, string>> = {
  [WalletFailure.WalletNotFound]: 'wallet_not_found',
  [WalletFailure.CurrencyMismatch]: 'wallet_currency_mismatch',
  [WalletFailure.OperationConflict]: 'wallet_operation_conflict',
};

/**
 * When the wallet's first step (a hold or a debit) was refused for good (no such wallet, another currency, the
 * operation id taken by another amount): nothing was taken, the payment fails with why. Answers whether it was.
 */
function failIfRefused(payment: WalletPort, err: unknown): boolean {
  const refusal = holdRefusals[failureType(err) ?? ''];
  if (refusal === undefined) return false;
  // At the time the step failed (absent before failures said): the same in every replay.
  const at = failedAtOf(err);
  markWallet(payment.state, 'released', at);
  payment.state.view.failureReason = refusal;
  payment.transition('failed', undefined, at);
  return true;
}

/**
 * The wallet part's first step, before any provider call: holds `wallet.amount` under `hold:<merchant>:<key>`.
 * Answers whether the payment goes on. Short funds decline it (`wallet_insufficient_funds`), a refusal fails it, both
 * with nothing held; a hold whose outcome stayed unknown through its budget (database trouble) fails it
 * (`wallet_unavailable`) and stays `held` in the view, so {@link settleWalletPart} releases whatever it may have held.
 * `afterFirstStep`: the split payment's first step held nothing or said nothing (charge.ts).
 */
export async function holdWalletPart(payment: WalletPort, afterFirstStep = false): Promise<boolean> {
  const { input, state } = payment;
  const part = input.request.wallet;
  const view = state.view.wallet;
  if (part === undefined || view === undefined) return true;
  try {
    // After a split payment's first step, the hold is local, no patch asked: every such run has the local steps, and a
    // replay may hear the step's answer in an earlier task than the run did, where a patch asked now would not be known.
    const hold = afterFirstStep || patched(WALLET_LOCAL_STEPS) ? holdWalletInTask : holdWallet;
    const held = await hold(holdArgs(input));
    if (held.status === 'held') return true;
    // When the ledger answered (absent in answers recorded before): a replay that hears it a task earlier, after a
    // split payment's first step, stamps the same decline.
    declineShortFunds(payment, held.at);
  } catch (err) {
    log.warn('the wallet part could not be held; the payment failed before any provider call', {
      reason: messageOf(err),
      type: failureType(err),
    });
    if (!failIfRefused(payment, err)) {
      state.view.failureReason = 'wallet_unavailable';
      payment.transition('failed', undefined, failedAtOf(err));
    }
  }
  state.firstCallSettled = true;
  return false;
}

/**
 * Whether a wallet-only payment pays in one debit ({@link debitWalletOnly}); else it is held first
 * ({@link holdWalletPart}), then captured. Asked of wallet-only payments only: the patch marker only on those.
 */
export const debitsAtOnce = (): boolean => patched(WALLET_DIRECT_DEBIT);

/**
 * A wallet-only payment in one step: the debit holds and captures it in one transaction, `succeeded`; short funds
 * decline it (`wallet_insufficient_funds`) and a refusal fails it, nothing taken. A debit whose outcome stayed unknown
 * through its budget (a minute of database trouble) may have taken the money: the payment is answered only once the
 * ledger says which ({@link settleUnknownDebit}), never `failed` on a guess.
 */
export async function debitWalletOnly(payment: WalletDebitPort): Promise<void> {
  const { input, state } = payment;
  // Asked before the debit's local activity, not after it (payment-news.ts says why).
  const newsInTask = newsInTaskPatched();
  try {
    const debit = await debitInTask(holdArgs(input));
    if (debit.status === 'captured') {
      markWallet(state, 'captured');
      payment.transition('succeeded');
    } else {
      declineShortFunds(payment);
    }
    // When the ledger decided it (absent from ledgers before it said): the time the API's answer carries too. The view
    // is then the input's and the ledger's alone, which a retry of this task reads back the same.
    if (debit.at !== undefined) {
      state.view.updatedAt = debit.at;
      if (newsInTask) payment.newsReproducible();
    }
  } catch (err) {
    if (!failIfRefused(payment, err)) await settleUnknownDebit(payment, err);
  }
  state.firstCallSettled = true;
}

/**
 * The debit's outcome is unknown: a release decides it. It records a release (nothing was taken, and a late debit of
 * the key is refused from then on: `failed`, `wallet_unavailable`), or is refused because the debit captured
 * (`succeeded`). A release that cannot run for a day leaves the payment `failed` with the part `held`: the
 * settlement tries the release again, and logs an error for an operator if the ledger shows the capture.
 */
async function settleUnknownDebit(payment: WalletPort, debitFailure: unknown): Promise<void> {
  const { input, state } = payment;
  log.warn('the wallet-only payment’s debit did not answer; a release decides whether it took the money', {
    reason: messageOf(debitFailure),
    type: failureType(debitFailure),
  });
  try {
    const released = await releaseUnknownDebit(settleArgs(input));
    if (released.declined === true) {
      // The key's debit was declined for short funds and the decline recorded (the API's debit, or this one's whose
      // answer was lost): declined, as the API answered, with the ledger's time. Results before the ledger said so
      // have no `declined`: those runs answered `failed`, and replay so.
      declineShortFunds(payment);
      state.view.updatedAt = released.wallet.updatedAt;
      return;
    }
    markWallet(state, 'released');
  } catch (err) {
    if (failureType(err) === WalletFailure.HoldSettled) {
      // Refused because the debit's capture is in the ledger: the payment took the money, decided then.
      markWallet(state, 'captured');
      payment.transition('succeeded');
      const settledAt = settledAtOf(err);
      if (settledAt !== undefined) state.view.updatedAt = settledAt;
      return;
    }
    log.error('the wallet-only payment’s debit outcome could not be read back; its settlement tries again', {
      type: failureType(err),
      reason: messageOf(err),
    });
  }
  state.view.failureReason = 'wallet_unavailable';
  payment.transition('failed');
}

/**
 * A wallet-only payment (nothing left for the provider): captured at once, then `succeeded`. A capture that did not
 * answer in time is left to {@link settleWalletPart}: the hold is the payment's, the capture happens eventually.
 */
export async function payFromWallet(payment: WalletPort): Promise<void> {
  const { input, state } = payment;
  try {
    const capture = patched(WALLET_LOCAL_STEPS) ? captureWalletOnlyInTask : captureWalletHold;
    await capture(settleArgs(input));
    markWallet(state, 'captured');
  } catch (err) {
    log.warn('the wallet-only payment’s capture is left to the settlement', { reason: messageOf(err) });
  }
  payment.transition('succeeded');
  state.firstCallSettled = true;
}

/**
 * Settles a held wallet part once the payment's outcome is known, whichever path decided it (the first call, a
 * reconcile, a provider webhook, an operator's verdict): captured when the payment succeeded, released when it was
 * declined, failed (nothing reached the provider, or the provider refused) or voided. While the outcome is unknown, in
 * review or waiting for the customer the hold is kept. The payment neither closes nor continues as new while a
 * settlement is due or out (its handoffs are not idle).
 */
export function settleWalletPart(payment: WalletPort): WalletSettlement {
  const { input, state } = payment;
  if (input.request.wallet === undefined) {
    return { ...noHandoffs, inTask: async () => undefined, askFirst: () => {}, inFirstStep: () => false };
  }
  let out = false;
  let askedFirst = false;
  let ledgerTime = false;
  let firstStep = false;
  let gaveUp = false;
  const due = (): Settlement | undefined =>
    state.view.wallet?.status === 'held' && !out && !gaveUp ? settlementOf(state.view.status) : undefined;
  /** Captures or releases the hold with `steps` (the task's local activities, or the settlement's activities). */
  const settle = async (kind: Settlement, steps: Record<Settlement, typeof captureWalletHold>): Promise<void> => {
    const settled = await steps[kind](settleArgs(input));
    markWallet(state, kind === 'capture' ? 'captured' : 'released', ledgerTime ? settled.wallet.updatedAt : undefined);
    payment.publish();
  };
  void (async () => {
    for (;;) {
      await condition(() => due() !== undefined);
      const kind = due();
      if (kind === undefined) continue; // not reached: nothing runs between the condition and here
      out = true;
      try {
        await settle(kind, { capture: captureWalletHold, release: releaseWalletHold });
      } catch (err) {
        // A day of database trouble, or the ledger's refusal: an operator must look (the hold stays in the ledger).
        gaveUp = true;
        log.error('the wallet part could not be settled; its hold stays in the ledger', {
          settlement: kind,
          type: failureType(err),
          reason: messageOf(err),
        });
      } finally {
        out = false;
      }
    }
  })();
  return {
    idle: () => !out && due() === undefined,
    askFirst: () => {
      askedFirst = patched(WALLET_SETTLE_ASKED_FIRST);
      ledgerTime = patched(WALLET_SETTLE_LEDGER_TIME);
      firstStep = patched(WALLET_SPLIT_FIRST_STEP);
    },
    inFirstStep: () => firstStep,
    inTask: async (settledInStep) => {
      const kind = due();
      if (settledInStep !== undefined && state.view.wallet?.status === 'held') {
        // The first step settled it by its attempt's answer, read as the payment reads it: the same settlement.
        if (settledInStep.kind !== kind) {
          log.error('the first step settled the wallet part otherwise than the payment’s status says', {
            settled: settledInStep.kind,
            status: state.view.status,
          });
        }
        markWallet(state, settledInStep.kind === 'capture' ? 'captured' : 'released', settledInStep.at);
        payment.publish();
        return;
      }
      // Only where the card part decided it; the patch marker only on those payments.
      if (kind === undefined || !(askedFirst || patched(WALLET_SETTLE_IN_TASK))) return;
      // Set before the step is scheduled, in the same activation as the decision: the loop above does not start too.
      out = true;
      try {
        await settle(kind, { capture: captureInTask, release: releaseInTask });
      } catch (err) {
        log.warn('the wallet part’s settlement in the task did not answer; the settlement activity takes over', {
          settlement: kind,
          reason: messageOf(err),
        });
      } finally {
        out = false;
      }
    },
  };
}

/** The settlement of a payment's held wallet part: its handoffs, and the step run where the card part decided it. */
export interface WalletSettlement extends Handoffs {
  /**
   * Captures or releases the hold at once, as a local activity, when the payment's status already decides it (a
   * split payment's card part answered); on failure the settlement's own activity takes over. Nothing otherwise.
   * `settledInStep`: the first step settled it already (with the ledger's time): only the view follows.
   */
  inTask(settledInStep?: FirstWalletStep['settled']): Promise<void>;
  /** Asks, before the split payment's first local activity, whether {@link inTask} may settle (patches). */
  askFirst(): void;
  /** Whether the split payment's first step holds and settles its wallet part itself (asked by {@link askFirst}). */
  inFirstStep(): boolean;
}

/**
 * The wallet's share of a refund (`requested`) of a payment with a wallet part, returned to the wallet first: as much
 * of it as the wallet's captured part not yet refunded covers; the card refunds the rest. Once per refund key (the
 * ledger's operation id is `refund:<merchant>:<refundKey>`): a later try of the key (`earlierShare`) repeats it
 * without a second effect. Undefined for a payment without a wallet part. A refusal of the ledger refuses the refund.
 */
export async function refundWalletShare(
  payment: WalletPort,
  refundKey: string,
  requested: number,
  earlierShare: number | undefined,
): Promise<number | undefined> {
  const { input, state } = payment;
  const wallet = state.view.wallet;
  if (wallet === undefined) return undefined;
  const share = earlierShare ?? Math.min(requested, walletRefundable(state.view));
  if (share === 0) return 0;
  try {
    await refundToWallet({ ...settleArgs(input), refundKey, amount: share });
  } catch (err) {
    throw ApplicationFailure.create({
      type: failureType(err) ?? WalletFailure.DatabaseNotApplied,
      message: `The refund's wallet share could not be returned: ${messageOf(err)}`,
      nonRetryable: true,
    });
  }
  if (earlierShare === undefined) {
    state.view.wallet = { ...wallet, refunded: wallet.refunded + share };
    state.view.updatedAt = nowIso();
  }
  return share;
}

/** What is done with a held wallet part: captured into the payment, or released back to the wallet. */
type Settlement = 'capture' | 'release';

/** What a payment's status means for its held wallet part. */
function settlementOf(status: PaymentStatus): Settlement | undefined {
  if (status === 'succeeded') return 'capture';
  if (status === 'declined' || status === 'failed' || status === 'voided') return 'release';
  return undefined;
}

/** The payment's hold: its wallet part under `hold:<merchant>:<key>`. */
export const holdArgs = (input: ChargeWorkflowInput) => ({
  ...settleArgs(input),
  amount: input.request.wallet?.amount ?? 0,
  currency: input.request.amount.currency,
});

const settleArgs = (input: ChargeWorkflowInput) => ({
  merchantId: input.merchantId,
  walletId: input.request.wallet?.walletId ?? '',
  paymentKey: input.key,
});

/** Short funds: the payment declined `wallet_insufficient_funds`, nothing held; at `at` when the ledger's answer says. */
function declineShortFunds(payment: WalletPort, at?: string): void {
  markWallet(payment.state, 'released', at);
  payment.state.view.declineCode = 'wallet_insufficient_funds';
  payment.transition('declined', undefined, at);
}

/** Sets the wallet part's status, at `at` (the ledger's time, where the step carries it) or the workflow's clock. */
function markWallet(state: PaymentState, status: WalletPartView['status'], at?: string): void {
  if (state.view.wallet === undefined) return;
  state.view.wallet = { ...state.view.wallet, status };
  state.view.updatedAt = at ?? nowIso();
}
