import {
  ActivityFailure,
  ApplicationFailure,
  CancellationScope,
  ParentClosePolicy,
  log,
  patched,
  sleep,
  startChild,
  workflowInfo,
} from '@temporalio/workflow';
import type { CreatePaymentArgs, CreatePaymentOutcome, FirstCreateResult, WorkerConfigDetail } from '../activities';
import type { WorkerProviderConfig } from '../domain/provider-payment';
import { defaultLocalAttemptTimeoutMs } from '../domain/retry-policy';
import { ErrorType } from '../domain/errors';
import { reconcileWorkflowId } from '../domain/ids';
import type { ReconcileInput, ReconcileResult } from '../domain/operations';
import { activitySummary, formatWait } from '../domain/summaries';
import { describeWorkerProvider, firstCreateAttempt, paymentMetadata } from './activity-options';
import { attemptFailure, failureType, messageOf, neverSent, notSentReason, sendsOf } from './failures';
import type { PaymentEntity } from './payment-entity';
import { ProviderBinding } from './provider-binding';
import { reconcileWorkflow } from './reconcile';
import { NEWS, unlessNews } from './unless-news';

/**
 * The history length of a payment's first workflow task on its first try: WorkflowExecutionStarted,
 * WorkflowTaskScheduled, WorkflowTaskStarted (an update-with-start's update is a message, not an event).
 */
const FIRST_TASK_HISTORY_LENGTH = 3;

/** Patch: a worker's refusal to send (`ValidationError`) after a request may have left is unknown, never `failed`. */
const REFUSAL_AFTER_SEND_UNKNOWN = 'refusal-after-send-unknown';
/** Patch: the create's reconcile ends as soon as provider news moved the payment on (see unlessNews). */
const CREATE_RECONCILE_ENDS_WITH_NEWS = 'create-reconcile-ends-with-news';

/** What an attempt that left no record may have done: sent, with an outcome nobody saw. */
const possiblySent = { everSent: true, everUnknown: true } as const;

/**
 * The charge's first provider call: a value (authorized, succeeded, declined), a refusal (failed), a write that
 * provably never left (failed, `provider_unavailable`), or an unknown outcome that the main loop reconciles. A write
 * that provably never left moves to the request's next provider, if it names one, under a key scoped to it; nothing
 * else does (an unknown outcome, an answer, a decline may have moved money at the provider that holds the payment).
 * Once a request may have reached the provider, the payment is never `failed` but by the provider's own refusal.
 */
export async function createAtProvider(payment: PaymentEntity): Promise<void> {
  // Read in the first activation. Longer than a clean first task: an earlier try of this task failed or timed out (its
  // worker died), and the local first attempt it may have made left no marker. Also when a signal came before the
  // first task: a false "possibly sent" only reconciles; a false "never sent" could charge twice. No patch: it changes
  // the local attempt's arguments and the view's count, never a command (the decisions follow the recorded results).
  let unaccounted = payment.input.shape === 3 && workflowInfo().historyLength > FIRST_TASK_HISTORY_LENGTH;
  for (;;) {
    const notSent = await createOnce(payment, unaccounted);
    unaccounted = false;
    if (notSent === undefined) break;
    const next = payment.nextProvider();
    if (next === undefined) {
      // Every attempt met an open breaker, a cool-down or a refused connection: the provider never saw it.
      payment.state.view.failureReason = 'provider_unavailable';
      payment.transition('failed');
      log.warn('charge never reached the provider', { reason: notSent });
      break;
    }
    await payment.failOver(next, notSent);
  }
  payment.state.firstCallSettled = true;
}

/**
 * One create at the provider holding the payment; answers why, when every attempt provably never left. `unaccounted`:
 * an earlier try of the first workflow task may have sent a local first attempt.
 */
async function createOnce(payment: PaymentEntity, unaccounted: boolean): Promise<string | undefined> {
  const { state, input, request } = payment;
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
          amount: request.amount.value,
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
    if (result.outcome === 'declined') {
      state.view.declineCode = result.declineCode;
      payment.transition('declined');
    } else {
      payment.learn(result.payment);
    }
  } catch (err) {
    state.view.attempts += sendsOf(err);
    const type = failureType(err);
    if (
      (type === ErrorType.ProviderRejected || (type === ErrorType.ValidationError && refusedBeforeAnySend(payment))) &&
      state.view.status === 'pending'
    ) {
      // The provider said no, or a worker refused before anything was sent: nothing happened, a failure, not a guess.
      payment.transition('failed');
      log.warn('charge rejected', { reason: messageOf(err), type });
    } else if (neverSent(err) && state.view.status === 'pending') {
      return notSentReason(err);
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
function refusedBeforeAnySend(payment: PaymentEntity): boolean {
  return payment.state.view.attempts === 0 || !patched(REFUSAL_AFTER_SEND_UNKNOWN);
}

/** What a local first attempt may have done, as its failure reports it; a timeout or anything unreadable: everything. */
function attemptRecordOf(err: unknown): NonNullable<CreatePaymentArgs['earlier']> {
  const failure = err instanceof ActivityFailure ? err.cause : err;
  const info =
    failure instanceof ApplicationFailure ? (failure.details?.[0] as Record<string, unknown> | undefined) : undefined;
  if (typeof info?.everSent === 'boolean' && typeof info.everUnknown === 'boolean') {
    return { everSent: info.everSent, everUnknown: info.everUnknown };
  }
  return { everSent: true, everUnknown: true };
}

/** The wait a provider asked for (429/503 with Retry-After) in answer to the local attempt, read through its wrapper. */
function retryAfterOf(err: unknown): number | undefined {
  const failure = attemptFailure(err);
  if (!(failure instanceof ApplicationFailure) || failure.type !== ErrorType.ProviderUnavailable) return undefined;
  const info = failure.details?.[0] as { retryAfterMs?: unknown } | undefined;
  return typeof info?.retryAfterMs === 'number' && info.retryAfterMs > 0 ? info.retryAfterMs : undefined;
}

/**
 * One create, as the workflow sees it: the activity on the provider's queue with its retry policy. A shape-3 charge's
 * first create starts with `firstCreateAttempt` instead (see {@link firstCreate}).
 */
async function sendCreate(
  payment: PaymentEntity,
  args: CreatePaymentArgs,
  unaccounted: boolean,
): Promise<CreatePaymentOutcome> {
  // Shape 3 before its first step: the worker's view of the provider is not known yet (never after a failover).
  if (payment.input.shape === 3 && payment.binding === undefined) return firstCreate(payment, args, unaccounted);
  return payment.requireBinding().acts.write.createPayment(args);
}

/**
 * A shape-3 charge's first create: one local activity answers the worker's view of the provider (capabilities and
 * retry presets, recorded in its marker: the payment runs every later activity, its reconcile and its continuation
 * with them) and, against a provider that honours keys and has no limits of its own, makes the first attempt. That
 * attempt's value, decline or refusal is the charge's answer, exactly as an attempt 1 of the activity would be; any
 * other failure (not sent, unavailable, unknown, cut off at its bound) is just "attempt 1": the activity takes over
 * under the same key (derived from the scope), carrying what the local attempt may have sent, so a request that
 * reached the provider is answered by its stored answer, and only the activity's final failure is classified (one
 * code path: failover, never sent, unknown). The activity checks the recorded capabilities against its own worker's
 * adapter before it sends anything (a worker configured otherwise refuses: finally only while nothing may have been
 * sent). `unaccounted`: an earlier try of this first task may have sent an attempt that left no record: it is counted
 * and carried as sent with an unknown outcome, so no later refusal can make the create look never sent.
 */
async function firstCreate(
  payment: PaymentEntity,
  args: CreatePaymentArgs,
  unaccounted: boolean,
): Promise<CreatePaymentOutcome> {
  const { localAttemptTimeoutMs } = payment.input.timings;
  const boundMs = localAttemptTimeoutMs ?? defaultLocalAttemptTimeoutMs;
  // The payment runs every later activity, its reconcile and its continuation with the worker's view.
  const bindAfterLocal = (config: WorkerProviderConfig) =>
    (payment.binding = ProviderBinding.afterLocalAttempt(payment.provider, config, localAttemptTimeoutMs));
  const lost = unaccounted ? { earlier: possiblySent } : {};
  if (unaccounted) payment.state.view.attempts += 1;
  let first: FirstCreateResult;
  try {
    first = await firstCreateAttempt(boundMs, payment.provider)({ ...args, ...lost, boundMs });
  } catch (err) {
    const type = failureType(err);
    const detail = workerDetailOf(err);
    const recorded = detail?.workerConfig;
    // A final answer: the local attempt's failure is the create's (nothing else runs against this provider).
    if (type === ErrorType.ProviderRejected || type === ErrorType.ValidationError) {
      if (recorded !== undefined) bindAfterLocal(recorded);
      throw err;
    }
    // Cut off by Temporal itself (a stuck worker): the worker's view is read again, one more local activity.
    const config = recorded ?? (await describeWorkerProvider(payment.provider));
    const { acts } = bindAfterLocal(config);
    const after = acts.createAfterLocal;
    // The only attempt the worker's retry policy allows: the local attempt's failure is the create's.
    if (after === undefined) throw err;
    const earlier = attemptRecordOf(err);
    // The delay attempt 1's classification chose (Retry-After, else full jitter): the next attempt waits it, as the
    // activity's own retry would. A failure recorded before it carried one: the provider's Retry-After only. A wait
    // longer than the create budget ends the create as the activity's would (its outcome then reconciled).
    const wait = detail?.retryDelayMs ?? retryAfterOf(err);
    if (wait !== undefined && wait > acts.createBudgetMs) throw err;
    if (wait !== undefined) {
      await sleep(wait, {
        summary: `wait ${formatWait(wait)} before ${activitySummary('create', payment.provider)} takes over from the local first attempt`,
      });
    }
    log.info('local first create attempt did not settle; the activity takes over with the same key', {
      reason: messageOf(err),
      ...earlier,
    });
    // The local attempt's requests are the create's first; the activity's are counted with its own answer.
    payment.state.view.attempts += sendsOf(err);
    return after({ ...args, earlier, expectCapabilities: config.capabilities });
  }
  if (first.attempt === 'settled') {
    bindAfterLocal(first.config);
    return first.outcome;
  }
  // A provider without keys or with limits of its own: the create runs on its queue only, with the worker's presets.
  const { acts } = (payment.binding = ProviderBinding.of(payment.provider, first.config));
  log.info('no local first create attempt at this provider', { reason: first.reason });
  return acts.write.createPayment({ ...args, ...lost, expectCapabilities: first.config.capabilities });
}

/** The worker's view of the provider (and the chosen retry delay) a local first attempt's failure carries, if any. */
function workerDetailOf(err: unknown): WorkerConfigDetail | undefined {
  const failure = err instanceof ActivityFailure ? err.cause : err;
  if (!(failure instanceof ApplicationFailure)) return undefined;
  for (const detail of failure.details ?? []) {
    const found = detail as Partial<WorkerConfigDetail> | null | undefined;
    if (found?.workerConfig !== undefined) {
      const { retryDelayMs } = found;
      return {
        workerConfig: found.workerConfig,
        ...(typeof retryDelayMs === 'number' && retryDelayMs > 0 ? { retryDelayMs } : {}),
      };
    }
  }
  return undefined;
}

/**
 * The durable wait-and-check of the charge's unknown outcome, as a child that goes with the payment. It ends with the
 * provider's payment, a decline, a refusal, or the payment in review; a reconcile that ended without a result leaves the
 * payment unknown for the sweep.
 */
export async function reconcileCreate(payment: PaymentEntity): Promise<void> {
  const { state, input, request } = payment;
  payment.reconcileRunning = true;
  const binding = payment.requireBinding();
  const reconcileInput: ReconcileInput = {
    ...payment.keyScope,
    operation: 'create',
    provider: payment.provider,
    reference: request.orderId,
    expect: { kind: 'created', amount: request.amount.value, currency: request.amount.currency },
    capabilities: binding.capabilities,
    scheduleMs: input.timings.reconcileScheduleMs,
    settleWindowMs: input.timings.settleWindowMs,
    firstSentAtMs: state.firstSentAtMs ?? Date.now(),
    retry: binding.retry,
    resubmit: {
      kind: 'create',
      amount: request.amount.value,
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
      ? await unlessNews(scope, child.result(), () => state.view.status !== 'unknown')
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
  if (result.outcome === 'found') {
    payment.learn(result.payment);
  } else if (result.outcome === 'declined') {
    state.view.declineCode = result.declineCode;
    payment.transition('declined');
  } else if (result.outcome === 'rejected') {
    payment.transition('failed');
  } else {
    state.pendingReview = {
      operation: 'create',
      key: input.key,
      amount: request.amount.value,
      expectAtLeast: 0,
      statusBefore: 'unknown',
    };
    payment.transition('needs_review', result.reason);
  }
}
