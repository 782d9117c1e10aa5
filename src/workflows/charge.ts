import {
  ApplicationFailure,
  ParentClosePolicy,
  WorkflowIdReusePolicy,
  allHandlersFinished,
  condition,
  makeContinueAsNewFunc,
  executeChild,
  getExternalWorkflowHandle,
  log,
  patched,
  setHandler,
  startChild,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/common';
import {
  type CaptureArgs,
  type RefundArgs,
  captureUpdate,
  ensureReconcileSignal,
  paymentQuery,
  reconcileResolvedSignal,
  refundUpdate,
  resolveUpdate,
  submitUpdate,
  webhookSignal,
} from '../domain/definitions';
import { ErrorType } from '../domain/errors';
import { captureWorkflowId, reconcileWorkflowId, refundWorkflowId } from '../domain/ids';
import type { ReconcileInput, ReconcileResult } from '../domain/operations';
import type { PaymentStatus, PaymentView } from '../domain/payment';
import { MerchantIdAttr, OrderIdAttr, PaymentStatusAttr, ProviderAttr } from '../domain/search-attributes';
import type { ChargeWorkflowInput } from '../domain/workflow-inputs';
import type { ProviderCapabilities, ProviderPayment } from '../providers/types';
import { describeProvider, paymentMetadata, providerActivities } from './activity-options';
import { captureWorkflow } from './capture';
import { Lock } from './lock';
import { type MoneyMovementInput, type MoneyMovementResult, movementReconcileInput } from './money-movement';
import {
  type PaymentState,
  type PendingReview,
  type SubOperation,
  applyProviderEvent,
  applyProviderPayment,
  findSubOperation,
  hasRunningOperation,
  isClosedStatus,
  operationViews,
  refundable,
  reviewSatisfied,
  setStatus,
} from './payment-state';
import { failureType, messageOf, neverSent, reconcileWorkflow } from './reconcile';
import { refundWorkflow } from './refund';

/** Patch: the status search attribute is upserted only when the status changed (histories before it upsert more). */
const PUBLISH_ON_CHANGE = 'publish-status-on-change';
/** Patch: an operator's `providerPaymentId` is looked up at the provider before it is accepted. */
const VERIFY_OPERATOR_PAYMENT = 'verify-operator-payment-id';

/** Carried across continue-as-new: the payment's whole state plus what the first run learnt. */
export interface ChargeContinuation {
  readonly state: PaymentState;
  readonly capabilities: ProviderCapabilities;
}

const nowIso = () => new Date().toISOString();

/**
 * One payment, id `charge:<merchantId>:<key>`: charges (or authorizes) once, reconciles an unknown outcome, and stays
 * open while money can still move so every capture and refund is validated against one serialized state.
 */
export async function chargeWorkflow(input: ChargeWorkflowInput, carried?: ChargeContinuation): Promise<PaymentView> {
  const { request, timings } = input;
  const state: PaymentState = carried?.state ?? initialState(input);
  const lock = new Lock();
  // The lean shape (see HistoryShape) takes what it can from its input instead of recording it in history.
  const lean = input.shape === 2;
  let capabilities: ProviderCapabilities | undefined = carried?.capabilities ?? (lean ? input.capabilities : undefined);
  let reconcileRunning = false;
  let reconcileWanted = false;
  let acts: ReturnType<typeof providerActivities> | undefined = undefined;
  let publishedStatus: PaymentStatus = state.view.status;
  const requireActs = () => {
    if (!acts) throw ApplicationFailure.create({ type: 'NotReady', message: 'Provider activities not ready yet' });
    return acts;
  };

  const publish = () => {
    if ((lean || patched(PUBLISH_ON_CHANGE)) && publishedStatus === state.view.status) return;
    publishedStatus = state.view.status;
    upsertSearchAttributes([{ key: PaymentStatusAttr, value: state.view.status }]);
  };
  /** Keeps the view's list of captures, refunds and voids in step with the sub-operations. */
  const syncOperations = () => {
    if (state.subOperations.length > 0) state.view.operations = operationViews(state);
  };
  const transition = (status: PaymentStatus, reason?: string) => {
    setStatus(state, status, nowIso(), reason);
    publish();
  };
  /** Applies what the provider says (forward only), settles a review it answers, and publishes the status. */
  const learn = (payment: ProviderPayment) => {
    applyProviderPayment(state, payment, nowIso());
    afterProviderNews();
  };
  const afterProviderNews = () => {
    const settled = reviewSatisfied(state);
    if (state.view.status === 'needs_review' && settled) {
      state.pendingReview = undefined;
      transition(settled);
    }
    publish();
  };

  setHandler(paymentQuery, () => state.view);

  setHandler(
    submitUpdate,
    async () => {
      // Early answer: the first provider call's result. The lean shape leaves the short wait to the caller's own
      // deadline (then 202 from a query): no timer in history for it.
      if (lean) await condition(() => state.firstCallSettled);
      else await condition(() => state.firstCallSettled, timings.submitWaitMs);
      return state.view;
    },
    {
      validator: ({ fingerprint }) => {
        if (fingerprint !== state.fingerprint) {
          throw ApplicationFailure.create({
            type: ErrorType.IdempotencyKeyReused,
            message: 'This idempotency key was used for a different payment request',
            nonRetryable: true,
          });
        }
      },
    },
  );

  setHandler(webhookSignal, async (event) => {
    const changed = applyProviderEvent(state, event, nowIso());
    if (!changed) return;
    afterProviderNews();
    // The wait-and-check ends early: the webhook told us what a lookup would have (each reconcile checks it against
    // its own expectation).
    const reconciling = [
      ...(reconcileRunning ? [reconcileWorkflowId(input.merchantId, 'create', input.key)] : []),
      ...state.subOperations
        .filter((o) => o.reconciling && o.kind !== 'void')
        .map((o) => reconcileWorkflowId(input.merchantId, o.kind, o.key)),
    ];
    for (const id of reconciling) {
      await getExternalWorkflowHandle(id)
        .signal(reconcileResolvedSignal, event.payment)
        .catch(() => undefined);
    }
  });

  setHandler(ensureReconcileSignal, () => {
    if (state.view.status === 'unknown' && !reconcileRunning) reconcileWanted = true;
  });

  /**
   * Capture and refund share one shape. A repeat of a known key (same fingerprint) answers its operation's state without
   * a new effect; the same key with another amount is refused. A new key is checked against the state under the lock
   * (validators run before the lock, so concurrent updates are checked again), then its first provider call runs as a
   * child workflow whose id, `<kind>:<merchant>:<key>`, is the merchant-wide UNIQUE constraint of the key: a key used on
   * another payment is refused before any effect. The update answers once that first call settled; an unknown outcome
   * goes on as a reconcile child without holding the update or the lock.
   */
  const moneyMovement = <A extends { readonly fingerprint: string; readonly amount?: number }>(
    kind: 'capture' | 'refund',
    keyOf: (args: A) => string,
    assertAllowed: (args: A) => void,
    totalBefore: () => number,
  ) => ({
    handler: async (args: A) => {
      const op = await lock.run(async () => {
        const key = keyOf(args);
        const earlier = findSubOperation(state, kind, key);
        if (earlier) {
          if (earlier.fingerprint !== args.fingerprint) throw keyReused(kind);
          return earlier; // a repeat: the same answer, no new effect
        }
        assertAllowed(args);
        const amount = args.amount ?? state.view.amountAuthorized - state.view.amountCaptured;
        const before = totalBefore();
        const movement: MoneyMovementInput = { ...movementInput(key, amount), firstCallOnly: true };
        const startedAtMs = Date.now();
        // Never a second run under one key, also after the first closed: the key belongs to its first request.
        const workflowIdReusePolicy = WorkflowIdReusePolicy.REJECT_DUPLICATE;
        let child: { result(): Promise<MoneyMovementResult> };
        try {
          child =
            kind === 'capture'
              ? await startChild(captureWorkflow, {
                  workflowId: captureWorkflowId(input.merchantId, key),
                  args: [{ ...movement, amountCapturedBefore: before }],
                  workflowIdReusePolicy,
                })
              : await startChild(refundWorkflow, {
                  workflowId: refundWorkflowId(input.merchantId, key),
                  args: [{ ...movement, amountRefundedBefore: before }],
                  workflowIdReusePolicy,
                });
        } catch (err) {
          if (err instanceof WorkflowExecutionAlreadyStartedError) throw keyReused(kind); // used on another payment
          throw err;
        }
        const op: SubOperation = { kind, key, fingerprint: args.fingerprint, amount, state: 'running' };
        state.subOperations.push(op);
        syncOperations();
        let result: MoneyMovementResult;
        try {
          result = await child.result();
        } catch (err) {
          // The child failed or was terminated: whether its call reached the provider is not known.
          result = {
            outcome: 'unknown',
            reason: `${kind} ended without a result: ${messageOf(err)}`,
            firstSentAtMs: startedAtMs,
          };
        }
        op.firstCallSettled = true;
        settleSubOperation(op, result, movement, before);
        return op;
      });
      await condition(() => op.firstCallSettled === true || op.state !== 'running');
      return state.view;
    },
    validator: (args: A) => {
      const earlier = findSubOperation(state, kind, keyOf(args));
      if (earlier) {
        if (earlier.fingerprint !== args.fingerprint) throw keyReused(kind);
        return;
      }
      assertAllowed(args);
    },
  });
  const movementInput = (key: string, amount: number): MoneyMovementInput => ({
    merchantId: input.merchantId,
    key,
    provider: request.provider,
    reference: request.orderId,
    paymentId: state.view.providerPaymentId as string,
    amount,
    capabilities: requireCapabilities(capabilities),
    timings,
    ...(input.retry === undefined ? {} : { retry: input.retry }),
  });

  const capture = moneyMovement(
    'capture',
    (args: CaptureArgs) => args.captureKey,
    (args) => assertCapturable(state, args.amount),
    () => state.view.amountCaptured,
  );
  setHandler(captureUpdate, capture.handler, { validator: capture.validator });

  const refund = moneyMovement(
    'refund',
    (args: RefundArgs) => args.refundKey,
    (args) => assertRefundable(state, args.amount),
    () => state.view.amountRefunded,
  );
  setHandler(refundUpdate, refund.handler, { validator: refund.validator });

  setHandler(
    resolveUpdate,
    (args) =>
      lock.run(async () => {
        const review = state.pendingReview;
        if (!review) return state.view;
        let found: ProviderPayment | undefined;
        if (args.outcome === 'succeeded' && args.providerPaymentId && patched(VERIFY_OPERATOR_PAYMENT)) {
          // Nothing an operator types is trusted without the provider: the payment must exist and be this one.
          found = await verifiedProviderPayment(args.providerPaymentId, review);
        }
        log.info('operator resolved a payment under review', { operation: review.operation, outcome: args.outcome });
        if (args.outcome === 'succeeded') {
          if (found) applyProviderPayment(state, found, nowIso());
          if (review.operation === 'create') {
            if (args.providerPaymentId && !found) state.view.providerPaymentId = args.providerPaymentId;
            if (!found) {
              state.view.amountAuthorized = state.view.amount.value;
              if (request.capture === 'automatic') state.view.amountCaptured = state.view.amount.value;
            }
          } else if (review.operation === 'capture') {
            state.view.amountCaptured = Math.max(state.view.amountCaptured, review.expectAtLeast);
          } else if (review.operation === 'refund') {
            state.view.amountRefunded = Math.max(state.view.amountRefunded, review.expectAtLeast);
          }
        }
        const after = statusAfterResolve(review, args.outcome, request.capture === 'manual');
        for (const op of state.subOperations)
          if (op.state === 'needs_review') op.state = args.outcome === 'succeeded' ? 'done' : 'rejected';
        state.pendingReview = undefined;
        transition(after);
        syncOperations();
        return state.view;
      }),
    {
      validator: (_args) => {
        if (state.view.status !== 'needs_review') {
          throw ApplicationFailure.create({
            type: ErrorType.InvalidTransition,
            message: `Only a payment in needs_review can be resolved; this one is ${state.view.status}`,
            nonRetryable: true,
          });
        }
      },
    },
  );

  /** Looks an operator-supplied provider payment id up and checks it is this payment (merchant, key, money). */
  async function verifiedProviderPayment(providerPaymentId: string, review: PendingReview): Promise<ProviderPayment> {
    const reject = (why: string) =>
      ApplicationFailure.create({
        type: ErrorType.ValidationError,
        message: `providerPaymentId ${why}`,
        nonRetryable: true,
        details: [{ field: 'providerPaymentId' }],
      });
    if (
      review.operation !== 'create' &&
      state.view.providerPaymentId &&
      providerPaymentId !== state.view.providerPaymentId
    )
      throw reject('is not the provider payment of this payment');
    const found = await requireActs().lookup.lookupPayment({
      provider: request.provider,
      merchantId: input.merchantId,
      key: input.key,
      operation: 'create',
      reference: request.orderId,
      paymentId: providerPaymentId,
    });
    if (!found) throw reject('was not found at the provider');
    const m = found.metadata;
    if (m && (m.merchant_id !== input.merchantId || m.payment_key !== input.key))
      throw reject('belongs to another payment at the provider');
    if (found.amount !== request.amount.value || found.currency !== request.amount.currency)
      throw reject('has another amount or currency at the provider');
    if (!m && found.reference !== request.orderId) throw reject('has another reference at the provider');
    return found;
  }

  /** Records how a capture's or refund's first call (or, in older children, its whole reconcile) ended. */
  function settleSubOperation(
    op: SubOperation,
    result: MoneyMovementResult,
    movement: MoneyMovementInput,
    before: number,
  ) {
    if (result.outcome === 'done') {
      op.state = 'done';
      learn(result.payment);
    } else if (result.outcome === 'rejected') {
      op.state = 'rejected';
      op.reason = result.reason;
      if (result.providerCode !== undefined) op.providerCode = result.providerCode;
    } else if (result.outcome === 'unknown') {
      reconcileSubOperation(op, movement, before, result.firstSentAtMs);
    } else {
      sendToReview(op, result.reason);
    }
    syncOperations();
  }

  /** An operation whose outcome is unknown, or whose reconcile found nothing, waits for an operator. */
  function sendToReview(op: SubOperation, reason: string) {
    op.state = 'needs_review';
    op.reason = reason;
    state.pendingReview = {
      operation: op.kind,
      key: op.key,
      amount: op.amount,
      expectAtLeast:
        op.kind === 'capture'
          ? state.view.amountCaptured + op.amount
          : op.kind === 'refund'
            ? state.view.amountRefunded + op.amount
            : 0,
      statusBefore: state.view.status,
    };
    transition('needs_review', reason);
    syncOperations();
  }

  /**
   * The durable wait-and-check of a capture or refund with an unknown outcome. It runs beside the main line, not in the
   * update handler, so the caller gets its 202 at once; the operation stays `running` (and new captures and refunds
   * answer `operation_in_flight`) until the reconcile ends. A reconcile that fails or is terminated decided nothing:
   * the operation goes to review, never stays running.
   */
  function reconcileSubOperation(op: SubOperation, movement: MoneyMovementInput, before: number, sentAtMs: number) {
    const kind = op.kind === 'refund' ? 'refund' : 'capture';
    op.reconciling = true;
    void (async () => {
      let result: ReconcileResult | undefined;
      let failure: string | undefined;
      try {
        result = await executeChild(reconcileWorkflow, {
          workflowId: reconcileWorkflowId(input.merchantId, kind, op.key),
          args: [movementReconcileInput(kind, movement, before, sentAtMs)],
        });
      } catch (err) {
        failure = `reconcile of ${kind} ended without a result: ${messageOf(err)}`;
        log.warn('reconcile of a capture/refund ended without a result; it goes to review', { reason: failure });
      }
      op.reconciling = false;
      if (result?.outcome === 'found') {
        op.state = 'done';
        learn(result.payment);
      } else if (result?.outcome === 'rejected' || result?.outcome === 'declined') {
        op.state = 'rejected';
        op.reason = result.outcome === 'rejected' ? result.reason : result.declineCode;
      } else {
        sendToReview(op, result?.outcome === 'needs_review' ? result.reason : (failure ?? 'reconcile ended'));
      }
      syncOperations();
    })();
  }

  // ---- main line ----
  // The lean shape's starter sets these in the start request; a starter that did not gets them here.
  if (!lean || workflowInfo().typedSearchAttributes.get(PaymentStatusAttr) === undefined) {
    upsertSearchAttributes([
      { key: PaymentStatusAttr, value: state.view.status },
      { key: MerchantIdAttr, value: input.merchantId },
      { key: OrderIdAttr, value: request.orderId },
      { key: ProviderAttr, value: request.provider },
    ]);
  }
  capabilities ??= await describeProvider(request.provider);
  acts = providerActivities(workflowInfo().taskQueue, request.provider, capabilities, input.retry);

  if (!carried) {
    state.firstSentAtMs = Date.now();
    try {
      const result = await requireActs().write.createPayment({
        provider: request.provider,
        merchantId: input.merchantId,
        key: input.key,
        input: {
          amount: request.amount.value,
          currency: request.amount.currency,
          reference: request.orderId,
          paymentMethod: request.paymentMethod,
          capture: request.capture,
          metadata: paymentMetadata(input.merchantId, input.key),
        },
        notBeforeMs: state.firstSentAtMs,
        // The worker checks the starter's view of the provider against its own before it sends anything.
        ...(lean && input.capabilities ? { expectCapabilities: input.capabilities } : {}),
      });
      state.view.attempts += 1;
      if (result.outcome === 'declined') {
        state.view.declineCode = result.declineCode;
        transition('declined');
      } else {
        learn(result.payment);
      }
    } catch (err) {
      state.view.attempts += 1;
      const type = failureType(err);
      if (
        (type === ErrorType.ProviderRejected || type === ErrorType.ValidationError) &&
        state.view.status === 'pending'
      ) {
        // The provider said no, or the worker refused before sending: nothing happened, a real failure, not a guess.
        transition('failed');
        log.warn('charge rejected', { reason: messageOf(err), type });
      } else if (neverSent(err) && state.view.status === 'pending') {
        // Every attempt met an open breaker, a cool-down or a refused connection: the provider never saw it.
        state.view.failureReason = 'provider_unavailable';
        transition('failed');
        log.warn('charge never reached the provider', { reason: messageOf(err) });
      } else if (state.view.status === 'pending') {
        // Unless a webhook already told us what happened, the outcome is unknown: reconcile, never resend blindly.
        transition('unknown');
        reconcileWanted = true;
      }
    }
    state.firstCallSettled = true;
  }

  // The payment stays open while money can still move through it.
  for (;;) {
    const status = state.view.status;
    if (reconcileWanted && status === 'unknown') {
      reconcileWanted = false;
      await runCreateReconcile();
      continue;
    }
    if (status === 'unknown') {
      // Waiting for the sweep's ensureReconcile (a reconcile ended without a result); history may still grow (webhooks).
      await condition(
        () => reconcileWanted || state.view.status !== 'unknown' || workflowInfo().continueAsNewSuggested,
      );
      if (reconcileWanted || state.view.status !== 'unknown') continue;
    } else if (status === 'needs_review') {
      await condition(() => state.view.status !== 'needs_review' || workflowInfo().continueAsNewSuggested);
    } else if (status === 'authorized') {
      state.authorizationExpiresAtMs ??= Date.now() + timings.authorizationExpiryMs;
      const remaining = state.authorizationExpiresAtMs - Date.now();
      if (remaining <= 0) {
        // A capture still being reconciled may have happened: the void waits for its answer.
        if (hasRunningOperation(state)) {
          await condition(() => !hasRunningOperation(state));
          continue;
        }
        await lock.run(() => voidExpiredAuthorization());
        continue;
      }
      await condition(() => state.view.status !== 'authorized' || workflowInfo().continueAsNewSuggested, remaining);
    } else if (status === 'succeeded') {
      state.refundWindowEndsAtMs ??= Date.now() + timings.refundWindowMs;
      const remaining = state.refundWindowEndsAtMs - Date.now();
      if (remaining <= 0) {
        if (!hasRunningOperation(state)) break;
        // Past the window with a refund still open: only its end can change anything, so wait without a timer.
        await condition(() => !hasRunningOperation(state) || workflowInfo().continueAsNewSuggested);
      } else {
        await condition(() => state.view.status !== 'succeeded' || workflowInfo().continueAsNewSuggested, remaining);
      }
    } else if (isClosedStatus(status) || status === 'pending') {
      break;
    }
    if (workflowInfo().continueAsNewSuggested) {
      // A reconcile child goes with its run (parent close policy): continue as new only between reconciles.
      await condition(() => allHandlersFinished() && !hasRunningOperation(state));
      // The memo carries the fingerprint the client compares on closed runs: keep it on the new run.
      await makeContinueAsNewFunc<typeof chargeWorkflow>({ memo: workflowInfo().memo })(input, { state, capabilities });
    }
  }
  await condition(() => allHandlersFinished() && !hasRunningOperation(state));
  return state.view;

  async function runCreateReconcile() {
    reconcileRunning = true;
    const reconcileInput: ReconcileInput = {
      merchantId: input.merchantId,
      key: input.key,
      operation: 'create',
      provider: request.provider,
      reference: request.orderId,
      expect: { kind: 'created', amount: request.amount.value, currency: request.amount.currency },
      capabilities: requireCapabilities(capabilities),
      scheduleMs: timings.reconcileScheduleMs,
      settleWindowMs: timings.settleWindowMs,
      firstSentAtMs: state.firstSentAtMs ?? Date.now(),
      retry: input.retry,
      resubmit: {
        kind: 'create',
        amount: request.amount.value,
        currency: request.amount.currency,
        paymentMethod: request.paymentMethod,
        capture: request.capture,
      },
    };
    const child = await startChild(reconcileWorkflow, {
      workflowId: reconcileWorkflowId(input.merchantId, 'create', input.key),
      args: [reconcileInput],
      // A reconcile is pointless without its payment: it goes with it.
      parentClosePolicy: ParentClosePolicy.TERMINATE,
    });
    let result: ReconcileResult;
    try {
      result = await child.result();
    } catch (err) {
      // A reconcile that failed or was terminated decided nothing: the payment stays unknown, never failed, and the
      // sweep's ensureReconcile starts a new one.
      log.warn('reconcile ended without a result; the payment stays unknown', { reason: messageOf(err) });
      return;
    } finally {
      reconcileRunning = false;
    }
    if (state.view.status !== 'unknown') return; // a webhook already moved the payment on
    if (result.outcome === 'found') {
      learn(result.payment);
    } else if (result.outcome === 'declined') {
      state.view.declineCode = result.declineCode;
      transition('declined');
    } else if (result.outcome === 'rejected') {
      transition('failed');
    } else {
      state.pendingReview = {
        operation: 'create',
        key: input.key,
        amount: request.amount.value,
        expectAtLeast: 0,
        statusBefore: 'unknown',
      };
      transition('needs_review', result.reason);
    }
  }

  async function voidExpiredAuthorization() {
    if (state.view.status !== 'authorized') return;
    const paymentId = state.view.providerPaymentId as string;
    const key = `${input.key}:void`;
    // A void is an operation of its own: shown in the view, reviewed as a void (never as a capture).
    let op = findSubOperation(state, 'void', key);
    if (!op) {
      op = {
        kind: 'void',
        key,
        fingerprint: '',
        amount: state.view.amountAuthorized - state.view.amountCaptured,
        state: 'running',
      };
      state.subOperations.push(op);
    }
    op.state = 'running';
    syncOperations();
    try {
      const voided = await requireActs().write.voidPayment({
        provider: request.provider,
        merchantId: input.merchantId,
        key,
        paymentId,
      });
      op.state = 'done';
      learn(voided);
      syncOperations();
    } catch (err) {
      // A void that fails leaves an authorization that lapses at the provider on its own; an operator decides.
      sendToReview(op, `void after authorization expiry failed: ${messageOf(err)}`);
    }
  }
}

function statusAfterResolve(
  review: PendingReview,
  outcome: 'succeeded' | 'failed',
  manualCapture: boolean,
): PaymentStatus {
  switch (review.operation) {
    case 'create':
      return outcome === 'failed' ? 'failed' : manualCapture ? 'authorized' : 'succeeded';
    case 'void':
      // Not voided: the authorization stands until it lapses; the expiry path tries the void again (same key).
      return outcome === 'failed' ? 'authorized' : 'voided';
    default:
      return outcome === 'failed' ? review.statusBefore : 'succeeded';
  }
}

function initialState(input: ChargeWorkflowInput): PaymentState {
  const now = nowIso();
  return {
    view: {
      key: input.key,
      merchantId: input.merchantId,
      orderId: input.request.orderId,
      status: 'pending',
      amount: input.request.amount,
      amountAuthorized: 0,
      amountCaptured: 0,
      amountRefunded: 0,
      provider: input.request.provider,
      attempts: 0,
      createdAt: now,
      updatedAt: now,
    },
    fingerprint: input.fingerprint,
    seenEvents: [],
    subOperations: [],
    firstCallSettled: false,
  };
}

function requireCapabilities(c: ProviderCapabilities | undefined): ProviderCapabilities {
  if (!c) throw ApplicationFailure.create({ type: 'NotReady', message: 'Provider capabilities not loaded yet' });
  return c;
}

function keyReused(what: string) {
  return ApplicationFailure.create({
    type: ErrorType.IdempotencyKeyReused,
    message: `This idempotency key was used for a different ${what} request`,
    nonRetryable: true,
  });
}

function invalid(message: string) {
  return ApplicationFailure.create({ type: ErrorType.InvalidTransition, message, nonRetryable: true });
}

/** A capture or refund of this payment has an unknown outcome under reconcile: nothing new until it settled. */
function assertNoneReconciling(state: PaymentState) {
  const open = state.subOperations.find((o) => o.reconciling === true);
  if (open) {
    throw ApplicationFailure.create({
      type: ErrorType.OperationInFlight,
      message: `A ${open.kind} of this payment has an unknown outcome and is being reconciled; try again once it settled`,
      nonRetryable: true,
    });
  }
}

function assertCapturable(state: PaymentState, amount: number | undefined) {
  const v = state.view;
  if (v.status !== 'authorized') throw invalid(`Only an authorized payment can be captured; this one is ${v.status}`);
  assertNoneReconciling(state);
  if (state.subOperations.some((o) => o.kind === 'capture' && o.state === 'running'))
    throw invalid('A capture of this payment is already running');
  const capturable = v.amountAuthorized - v.amountCaptured;
  if (amount !== undefined && amount > capturable) {
    throw ApplicationFailure.create({
      type: ErrorType.AmountExceeded,
      message: `Capture of ${amount} exceeds the authorized amount still capturable (${capturable})`,
      nonRetryable: true,
      details: [{ field: 'amount', max: capturable }],
    });
  }
}

function assertRefundable(state: PaymentState, amount: number) {
  const v = state.view;
  if (v.status !== 'succeeded') throw invalid(`Only a captured payment can be refunded; this one is ${v.status}`);
  // Workflow time: deterministic, and the same clock the main line closes the window by.
  if (state.refundWindowEndsAtMs !== undefined && Date.now() >= state.refundWindowEndsAtMs)
    throw invalid('The refund window of this payment has closed');
  assertNoneReconciling(state);
  const max = refundable(state);
  if (amount > max) {
    throw ApplicationFailure.create({
      type: ErrorType.AmountExceeded,
      message: `Refund of ${amount} exceeds the captured amount not yet refunded (${max})`,
      nonRetryable: true,
      details: [{ field: 'amount', max }],
    });
  }
}
