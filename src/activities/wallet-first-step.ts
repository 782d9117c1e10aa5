/**
 * A split payment's first step as one local activity (patch `wallet-split-first-step`): the wallet part's hold, the
 * card part's local first attempt, and the hold's capture or release once that attempt's answer decides it. Three
 * steps of the same first workflow task, which were three local activities, each a round trip between the workflow
 * and the worker: now one. Each step is idempotent by its own id (the hold's and the settlement's operation ids, the
 * create's key), so a run again of the whole activity (its worker died, its task was retried) reads back what an
 * earlier run did and sends nothing the provider has not answered already.
 *
 * Nothing is sent unless the hold holds: short funds, a refusal or database trouble answer `wallet_not_held`, and the
 * workflow's own hold activity decides the payment (it reads back whatever this one did). A settlement that does not
 * answer leaves the hold `held` for the workflow's settlement, which captures or releases it by the payment's status.
 */
import { ApplicationFailure } from '@temporalio/common';
import { ErrorType } from '../domain/errors';
import { withDetail } from './attempt/worker-config';
import type { CreatePaymentOutcome, FirstCreateArgs, FirstCreateResult, WalletFirstStep } from './contract';
import type { WalletActivities } from './wallets';

/** The wallet steps a first step makes: the wallet activities' own (the same logs, failures and metrics). */
export type WalletFirstSteps = Pick<WalletActivities, 'holdWallet' | 'captureWalletHold' | 'releaseWalletHold'>;

/** The detail a split payment's first-step failure carries beside its own: what it did with the wallet part. */
export interface WalletStepDetail {
  readonly walletStep: WalletFirstStep;
}

type FirstAttempt = (args: FirstCreateArgs) => Promise<FirstCreateResult>;

/**
 * `firstAttempt` with a split payment's wallet part around it: held first, settled after when the answer decides it.
 * Without `steps` (a worker without a ledger) nothing is held and nothing sent: `wallet_not_held`.
 */
export function withWalletPart(firstAttempt: FirstAttempt, steps: WalletFirstSteps | undefined): FirstAttempt {
  return async (args) => {
    const { wallet, ...rest } = args;
    if (wallet === undefined) return firstAttempt(rest);
    if (steps === undefined) return { attempt: 'wallet_not_held' };
    try {
      const held = await steps.holdWallet(wallet);
      if (held.status !== 'held') return { attempt: 'wallet_not_held' };
    } catch {
      // Logged by the step. The workflow's hold, with its own retries, reads back or makes what this one may have.
      return { attempt: 'wallet_not_held' };
    }
    const ref = { merchantId: wallet.merchantId, walletId: wallet.walletId, paymentKey: wallet.paymentKey };
    const settle = async (kind: Settlement | undefined): Promise<WalletFirstStep> => {
      if (kind === undefined) return { held: true };
      try {
        const settled = await (kind === 'capture' ? steps.captureWalletHold : steps.releaseWalletHold)(ref);
        return { held: true, settled: { kind, at: settled.wallet.updatedAt } };
      } catch {
        // Logged by the step; the payment's settlement takes over (it captures or releases by the payment's status).
        return { held: true };
      }
    };
    let first: FirstCreateResult;
    try {
      first = await firstAttempt(rest);
    } catch (err) {
      // The provider refused the create for good: the payment fails, nothing was taken at the provider.
      const refused = err instanceof ApplicationFailure && err.type === ErrorType.ProviderRejected;
      throw withDetail(err, { walletStep: await settle(refused ? 'release' : undefined) } satisfies WalletStepDetail);
    }
    if (first.attempt === 'wallet_not_held') return first;
    if (first.attempt !== 'settled') return { ...first, wallet: { held: true } };
    return { ...first, wallet: await settle(settlementOf(first.outcome)) };
  };
}

type Settlement = 'capture' | 'release';

/**
 * What the attempt's answer means for the hold, exactly as the payment reads it: the provider's `succeeded` payment
 * makes it `succeeded` (capture), a decline `declined` (release); anything else (authorized, waiting for the customer)
 * leaves it held.
 */
function settlementOf(outcome: CreatePaymentOutcome): Settlement | undefined {
  if (outcome.outcome === 'declined') return 'release';
  if (outcome.outcome === 'succeeded' && outcome.payment.status === 'succeeded') return 'capture';
  return undefined;
}
