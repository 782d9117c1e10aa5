import {
  CancellationScope,
  ParentClosePolicy,
  log,
  patched,
  proxySinks,
  setCurrentDetails,
  startChild,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type { CreatePaymentArgs, CreatePaymentOutcome } from '../activities';
import { ErrorType } from '../domain/errors';
import { reconcileWorkflowId } from '../domain/ids';
import type { ReconcileInput, ReconcileResult } from '../domain/operations';
import { ProviderAttr } from '../domain/search-attributes';
import type { PaymentSinks } from '../domain/sinks';
import { paymentCurrentDetails } from '../domain/summaries';
import { providerAmountOf } from '../domain/wallet-operations';
import { paymentMetadata } from './activity-options';
import { type BindingPort, WalletNotHeld, firstCreate } from './first-create';
import { failedAtOf, failureType, messageOf, neverSent, notSentReason, sendsOf } from './failures';
import { nowIso } from './payment-port';
import { ProviderBinding } from './provider-binding';
import { reconcileWorkflow } from './reconcile';
import { NEWS, unlessNews } from './unless-news';
import { PATCHES } from './patches';

/** What the create needs of the payment beyond the {@link BindingPort}: its shape and its reconcile's flags. */
export interface CreatePort extends BindingPort {
  /** The lean history shape (2 and 3): the starter's view of the provider travels in the input. */
  readonly lean: boolean;
  /** The create's reconcile child is running. */
  reconcileRunning: boolean;
  /** The main loop should start a reconcile of the create. */
  reconcileWanted: boolean;
}

/**
 * The history length of a payment's first workflow task on its first try: WorkflowExecutionStarted,
 * WorkflowTaskScheduled, WorkflowTaskStarted (an update-with-start's update is a message, not an event).
 */
const FIRST_TASK_HISTORY_LENGTH = 3;

/** Patch: a worker's refusal to send (`ValidationError`) after a request may have left is unknown, never `failed`. */
const REFUSAL_AFTER_SEND_UNKNOWN = PATCHES.refusalAfterSendUnknown.id;
/** Patch: the create's reconcile ends as soon as provider news moved the payment on (see unlessNews). */
const CREATE_RECONCILE_ENDS_WITH_NEWS = PATCHES.createReconcileEndsWithNews.id;

/**
 * The charge's first provider call: a value (authorized, succeeded, declined), a refusal (failed), a write that
 * provably never left (failed, `provider_unavailable`), or an unknown outcome that the main loop reconciles. A write
 * that provably never left moves to the request's next provider, if it names one, under a key scoped to it; nothing
 * else does (an unknown outcome, an answer, a decline may have moved money at the provider that holds the payment).
 * Once a request may have reached the provider, the payment is never `failed` but by the provider's own refusal.
 */
export async function createAtProvider(
  payment: CreatePort,
  retried: boolean = firstTaskRetried(payment.input),
): Promise<void> {
  let unaccounted = retried;
  for (;;) {
    const notSent = await createOnce(payment, unaccounted);
    unaccounted = false;
    if (notSent === undefined) break;
    const next = nextProvider(payment);
    if (next === undefined) {
      // Every attempt met an open breaker, a cool-down or a refused connection: the provider never saw it. At the time
      // the activity gave up: a query that applies its failure ahead of this task answers the same view.
      payment.state.view.failureReason = 'provider_unavailable';
      payment.transition('failed', undefined, notSent.at);
      log.warn('charge never reached the provider', { reason: notSent.reason });
      break;
    }
    await failOver(payment, next, notSent.reason);
  }
  payment.state.firstCallSettled = true;
}

/**
 * Whether an earlier try of the payment's first workflow task may have sent a local first attempt; read in the first
 * activation. Longer than a clean first task: an earlier try of this task failed or timed out (its worker died), and
 * the local first attempt it may have made left no marker. Also when a signal came before the first task: a false
 * "possibly sent" only reconciles; a false "never sent" could charge twice. No patch: it changes the local attempt's
 * arguments and the view's count, never a command (the decisions follow the recorded results).
 */
export function firstTaskRetried(input: CreatePort['input']): boolean {
  return input.shape === 3 && workflowInfo().historyLength > FIRST_TASK_HISTORY_LENGTH;
}

/** The next provider of the request's list after the one holding the payment, if any. */
function nextProvider(payment: CreatePort): string | undefined {
  const { request } = payment.input;
  const list = [request.provider, ...(request.fallbackProviders ?? [])];
  return list[list.indexOf(payment.provider) + 1];
}

/**
 * Moves the charge to `to` (every attempt at the holder provably never left): recorded in the view, the Provider
 * search attribute follows, and the activities (own task queue, own breaker) are bound to the new provider.
 */
async function failOver(payment: CreatePort, to: string, reason: string): Promise<void> {
  const view = payment.state.view;
  const from = view.provider;
  const at = nowIso();
  view.failovers = [...(view.failovers ?? []), { from, to, reason, at }];
  view.provider = to;
  view.updatedAt = at;
  upsertSearchAttributes([{ key: ProviderAttr, value: to }]);
  setCurrentDetails(paymentCurrentDetails(view));
  log.warn('charge failed over to the next provider', { from, to, reason });
  // Metrics through a sink: no command (no history change, no patch), not called on replay.
  proxySinks<PaymentSinks>().paymentMetrics.failover({ from, to, reason });
  // The starter's capabilities describe the first provider only: the worker describes the new one. The presets stay
  // the payment's (none yet only where a shape-3 first step refused without the worker's view: the production ones).
  payment.binding = await ProviderBinding.described(to, payment.binding?.retry);
}

/** Why a create's every attempt provably never left, and when its activity gave up (recorded with its failure). */
interface NotSent {
  readonly reason: string;
  readonly at: string | undefined;
}

/**
 * One create at the provider holding the payment; answers why, when every attempt provably never left. `unaccounted`:
 * an earlier try of the first workflow task may have sent a local first attempt.
 */
async function createOnce(payment: CreatePort, unaccounted: boolean): Promise<NotSent | undefined> {
  const { state, input } = payment;
  const { request } = input;
  // A lost attempt was sent before this task: the run's start bounds it (a look-up by reference counts from here).
  state.firstSentAtMs = unaccounted ? workflowInfo().runStartTime.getTime() : Date.now();
  const scope = payment.keyScope;
  const firstProvider = scope.keyProvider === undefined;
  try {
    const result = await sendCreate(
      payment,
      {
        provider: payment.provider,
        ...scope,
        input: {
          // The wallet part is held apart: the provider is charged for the rest (all of it without one).
          amount: providerAmountOf(request),
          currency: request.amount.currency,
          reference: request.orderId,
          paymentMethod: request.paymentMethod,
          capture: request.capture,
          metadata: paymentMetadata(input.merchantId, input.key),
        },
        notBeforeMs: state.firstSentAtMs,
        // The worker checks the starter's view of the provider against its own before it sends anything (the starter's
        // capabilities are the first provider's).
        ...(payment.lean && input.capabilities && firstProvider ? { expectCapabilities: input.capabilities } : {}),
      },
      unaccounted,
    );
    state.view.attempts += result.sends ?? 1;
    // At the time the activity heard the provider: a query that applies the result ahead of this task answers the same.
    if (result.outcome === 'declined') {
      state.view.declineCode = result.declineCode;
      payment.transition('declined', undefined, result.at);
    } else {
      payment.learn(result.payment, result.at);
    }
  } catch (err) {
    // A split payment's first step that held nothing sent nothing: its hold decides (charge.ts), not this create.
    if (err instanceof WalletNotHeld) throw err;
    state.view.attempts += sendsOf(err);
    const type = failureType(err);
    if (
      (type === ErrorType.ProviderRejected || (type === ErrorType.ValidationError && refusedBeforeAnySend(payment))) &&
      state.view.status === 'pending'
    ) {
      // The provider said no, or a worker refused before anything was sent: nothing happened, a failure, not a guess.
      payment.transition('failed', undefined, failedAtOf(err));
      log.warn('charge rejected', { reason: messageOf(err), type });
    } else if (neverSent(err) && state.view.status === 'pending') {
      return { reason: notSentReason(err), at: failedAtOf(err) };
    } else if (state.view.status === 'pending') {
      // Unless a webhook already told us what happened, the outcome is unknown: reconcile, never resend blindly.
      payment.transition('unknown');
      payment.reconcileWanted = true;
    }
  }
  return undefined;
}

/**
 * A worker's refusal to send ends the charge `failed` only while no request may have reached the provider (the view's
 * `attempts` counts those). After one, the refusal is the worker's, not the provider's answer: unknown, reconciled.
 */
function refusedBeforeAnySend(payment: CreatePort): boolean {
  return payment.state.view.attempts === 0 || !patched(REFUSAL_AFTER_SEND_UNKNOWN);
}

/**
 * One create, as the workflow sees it: the activity on the provider's queue with its retry policy. A shape-3 charge's
 * first create starts with a local attempt instead (see {@link firstCreate}).
 */
async function sendCreate(
  payment: CreatePort,
  args: CreatePaymentArgs,
  unaccounted: boolean,
): Promise<CreatePaymentOutcome> {
  // Shape 3 before its first step: the worker's view of the provider is not known yet (never after a failover).
  if (payment.input.shape === 3 && payment.binding === undefined) return firstCreate(payment, args, unaccounted);
  return payment.requireBinding().acts.write.createPayment(args);
}

/**
 * The durable wait-and-check of the charge's unknown outcome, as a child that goes with the payment. It ends with the
 * provider's payment, a decline, a refusal, or the payment in review; a reconcile that ended without a result leaves the
 * payment unknown for the sweep.
 */
export async function reconcileCreate(payment: CreatePort): Promise<void> {
  const { state, input } = payment;
  const { request } = input;
  payment.reconcileRunning = true;
  const binding = payment.requireBinding();
  const reconcileInput: ReconcileInput = {
    ...payment.keyScope,
    operation: 'create',
    provider: payment.provider,
    reference: request.orderId,
    expect: { kind: 'created', amount: providerAmountOf(request), currency: request.amount.currency },
    capabilities: binding.capabilities,
    scheduleMs: input.timings.reconcileScheduleMs,
    settleWindowMs: input.timings.settleWindowMs,
    firstSentAtMs: state.firstSentAtMs ?? Date.now(),
    retry: binding.retry,
    resubmit: {
      kind: 'create',
      amount: providerAmountOf(request),
      currency: request.amount.currency,
      paymentMethod: request.paymentMethod,
      capture: request.capture,
    },
  };
  const endsWithNews = patched(CREATE_RECONCILE_ENDS_WITH_NEWS);
  const scope = new CancellationScope();
  const child = await scope.run(() =>
    startChild(reconcileWorkflow, {
      workflowId: reconcileWorkflowId(input.merchantId, 'create', input.key),
      args: [reconcileInput],
      // A reconcile is pointless without its payment: it goes with it.
      parentClosePolicy: ParentClosePolicy.TERMINATE,
    }),
  );
  let result: ReconcileResult;
  try {
    // A webhook the payment applied moves it on from `unknown`: the reconcile's question is answered.
    const ended = endsWithNews
      ? await unlessNews(
          scope,
          child.result(),
          () => state.view.status !== 'unknown',
          (p) => payment.reconcileEnding(p),
        )
      : await child.result();
    if (ended === NEWS) return;
    result = ended;
  } catch (err) {
    // A reconcile that failed or was terminated decided nothing: the payment stays unknown, never failed, and the
    // sweep's ensureReconcile starts a new one.
    log.warn('reconcile ended without a result; the payment stays unknown', { reason: messageOf(err) });
    return;
  } finally {
    payment.reconcileRunning = false;
  }
  // A resubmission's requests reached the provider too (a reconcile recorded before they were counted: none).
  state.view.attempts += result.resubmissionSends ?? 0;
  if (state.view.status !== 'unknown') return; // a webhook already moved the payment on
  // At the time the reconcile decided (absent before results said): a query that applies the result ahead of its task
  // answers the same view as the task.
  if (result.outcome === 'found') {
    payment.learn(result.payment, result.at);
  } else if (result.outcome === 'declined') {
    state.view.declineCode = result.declineCode;
    payment.transition('declined', undefined, result.at);
  } else if (result.outcome === 'rejected') {
    payment.transition('failed', undefined, result.at);
  } else {
    state.pendingReview = {
      operation: 'create',
      key: input.key,
      amount: providerAmountOf(request),
      expectAtLeast: 0,
      statusBefore: 'unknown',
    };
    payment.transition('needs_review', result.reason, result.at);
  }
}
