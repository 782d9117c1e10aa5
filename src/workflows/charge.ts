import {
  allHandlersFinished,
  condition,
  log,
  makeContinueAsNewFunc,
  patched,
  workflowInfo,
} from '@temporalio/workflow';
import type { PaymentView } from '../domain/payment';
import { formatWait } from '../domain/summaries';
import type { ChargeWorkflowInput } from '../domain/workflow-inputs';
import { onCancellationRequest } from './cancellation-request';
import { awaitCustomer } from './customer-action';
import { type PaymentScopes, callIn, paymentScopes } from './life-scope';
import { allHandoffs } from './handoffs';
import { handOverNews } from './payment-news';
import { type FirstWalletStep, WalletNotHeld } from './first-create';
import { createAtProvider, firstTaskRetried, reconcileCreate } from './payment-create';
import { type ChargeContinuation, PaymentEntity } from './payment-entity';
import { hasRunningOperation, isClosedStatus } from './payment-state';
import { PATCHES } from './patches';
import {
  type WalletSettlement,
  debitWalletOnly,
  debitsAtOnce,
  holdArgs,
  holdWalletPart,
  payFromWallet,
  settleWalletPart,
} from './wallet-part';
import { providerAmountOf } from '../domain/wallet-operations';

/** Patch: the run continues as new only once every reconcile the provider's news cancelled has ended. */
const CONTINUE_AFTER_CANCELLED_RECONCILES = PATCHES.continueAfterCancelledReconciles.id;

export type { ChargeContinuation } from './payment-entity';

/**
 * One payment, id `charge:<merchantId>:<key>`: charges (or authorizes) once, reconciles an unknown outcome, and stays
 * open while money can still move so every capture and refund is validated against one serialized state. A
 * cancellation request (the web UI's "Request Cancellation") is the payment's to decide: it voids an authorization and
 * refuses anything else (cancellation-request.ts); it never ends the run with money held.
 */
export function chargeWorkflow(input: ChargeWorkflowInput, carried?: ChargeContinuation): Promise<PaymentView> {
  const scopes = paymentScopes();
  return callIn(scopes.life, () => runPayment(input, scopes, carried));
}

/**
 * The payment's first steps: its wallet part's hold, if it has one (a refusal or short funds end the payment there),
 * then the provider for the rest, unless the wallet pays it all.
 */
async function startPayment(payment: PaymentEntity, wallet: WalletSettlement): Promise<void> {
  if (payment.input.request.wallet === undefined) return createAtProvider(payment);
  const walletOnly = providerAmountOf(payment.input.request) === 0;
  if (walletOnly && debitsAtOnce()) return debitWalletOnly(payment);
  // Read before the hold's activity: whether the first workflow task was tried before, as the create reads it.
  const retried = firstTaskRetried(payment.input);
  // A split payment's patch, asked before its first local activity (wallet-part.ts says why).
  if (!walletOnly) wallet.askFirst();
  if (!walletOnly && wallet.inFirstStep()) return splitInFirstStep(payment, wallet, retried);
  if (!(await holdWalletPart(payment))) return;
  if (walletOnly) return payFromWallet(payment);
  await createAtProvider(payment, retried);
  // The card part's answer decided the hold (succeeded, declined, failed): settled now, before the answer is read.
  await wallet.inTask();
}

/**
 * A split payment whose first step holds the wallet part, makes the card part's local first attempt and settles the
 * hold by its answer, all in one local activity. A step that held nothing sent nothing, and one that ended without
 * saying may have done anything: then the hold runs as its own step (it reads back what the first step did; short
 * funds decline the payment there) and the create runs as without a wallet part, counting a possibly sent attempt.
 */
async function splitInFirstStep(payment: PaymentEntity, wallet: WalletSettlement, retried: boolean): Promise<void> {
  const first: FirstWalletStep = { hold: holdArgs(payment.input) };
  payment.firstWallet = first;
  try {
    await createAtProvider(payment, retried);
  } catch (err) {
    if (!(err instanceof WalletNotHeld)) throw err;
    payment.firstWallet = undefined;
    log.info('the first step did not hold the wallet part; the hold runs as its own step', { reason: err.message });
    if (!(await holdWalletPart(payment, true))) return;
    await createAtProvider(payment, retried || err.possiblySent);
  } finally {
    payment.firstWallet = undefined;
  }
  await wallet.inTask(first.settled);
}

/** The payment's main line, in its life scope. */
async function runPayment(
  input: ChargeWorkflowInput,
  scopes: PaymentScopes,
  carried?: ChargeContinuation,
): Promise<PaymentView> {
  const { timings } = input;
  const payment = new PaymentEntity(input, carried);
  const { state } = payment;
  payment.registerHandlers(scopes.life);
  // Only for a payment with a wallet part (no history before it had one): no patch.
  const wallet = settleWalletPart(payment);
  const handoffs = allHandoffs(
    handOverNews(state, input, () => payment.takeReproducibleNews()),
    wallet,
  );
  onCancellationRequest(payment, scopes.shield);
  payment.publishAttributes();
  if (carried) payment.publishUnknownSince();
  await payment.connectProvider();
  if (!carried) await startPayment(payment, wallet);
  payment.firstCallAnswered();

  // The payment stays open while money can still move through it.
  for (;;) {
    const status = state.view.status;
    if (payment.reconcileWanted && status === 'unknown') {
      payment.reconcileWanted = false;
      await reconcileCreate(payment);
      continue;
    }
    if (status === 'unknown') {
      // Waiting for the sweep's ensureReconcile (a reconcile ended without a result); history may still grow (webhooks).
      await payment.park(() =>
        condition(
          () => payment.reconcileWanted || state.view.status !== 'unknown' || workflowInfo().continueAsNewSuggested,
        ),
      );
      if (payment.reconcileWanted || state.view.status !== 'unknown') continue;
    } else if (status === 'needs_review') {
      await payment.park(() =>
        condition(() => state.view.status !== 'needs_review' || workflowInfo().continueAsNewSuggested),
      );
    } else if (status === 'authorized') {
      state.authorizationExpiresAtMs ??= Date.now() + timings.authorizationExpiryMs;
      const remaining = state.authorizationExpiresAtMs - Date.now();
      if (remaining <= 0 || payment.voidWanted) {
        // A capture still being reconciled may have happened: the void waits for its answer.
        if (hasRunningOperation(state)) {
          await payment.park(() => condition(() => !hasRunningOperation(state)));
          continue;
        }
        await payment.voidExpiredAuthorization(payment.voidWanted ? 'a cancellation request' : undefined);
        payment.voidWanted = false;
        continue;
      }
      await payment.park(() =>
        condition(
          () => state.view.status !== 'authorized' || payment.voidWanted || workflowInfo().continueAsNewSuggested,
          remaining,
          { summary: `wait for a capture, void when the authorization expires in ${formatWait(remaining)}` },
        ),
      );
    } else if (status === 'succeeded') {
      state.refundWindowEndsAtMs ??= Date.now() + timings.refundWindowMs;
      const remaining = state.refundWindowEndsAtMs - Date.now();
      if (remaining <= 0) {
        if (!hasRunningOperation(state)) break;
        // Past the window with a refund still open: only its end can change anything, so wait without a timer.
        await payment.park(() => condition(() => !hasRunningOperation(state) || workflowInfo().continueAsNewSuggested));
      } else {
        await payment.park(() =>
          condition(() => state.view.status !== 'succeeded' || workflowInfo().continueAsNewSuggested, remaining, {
            summary: `accept refunds until the refund window closes in ${formatWait(remaining)}`,
          }),
        );
      }
    } else if (status === 'requires_action') {
      await awaitCustomer(payment);
    } else if (isClosedStatus(status) || status === 'pending') {
      break;
    }
    if (workflowInfo().continueAsNewSuggested) {
      // A reconcile child goes with its run (parent close policy): continue as new only between reconciles. A
      // cancellation request is decided (and its void made) in this run: the next one does not see the request.
      // And only once a reconcile the provider's news cancelled has ended (histories before this patch did not wait).
      const endedReconciles = patched(CONTINUE_AFTER_CANCELLED_RECONCILES);
      await payment.park(() =>
        condition(
          () =>
            allHandlersFinished() &&
            !hasRunningOperation(state) &&
            !payment.cancellationPending &&
            (!endedReconciles || payment.reconcilesEnding === 0) &&
            handoffs.idle(),
        ),
      );
      if (payment.voidWanted && state.view.status === 'authorized') continue;
      // The memo carries the fingerprint the client compares on closed runs: keep it on the new run.
      await makeContinueAsNewFunc<typeof chargeWorkflow>({ memo: workflowInfo().memo })(input, payment.continuation());
    }
  }
  await payment.park(() => condition(() => allHandlersFinished() && !hasRunningOperation(state) && handoffs.idle()));
  return state.view;
}
