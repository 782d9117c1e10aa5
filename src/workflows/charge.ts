import {
  ApplicationFailure,
  ParentClosePolicy,
  allHandlersFinished,
  condition,
  makeContinueAsNewFunc,
  executeChild,
  getExternalWorkflowHandle,
  log,
  setHandler,
  startChild,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
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
import { captureWorkflow, type CaptureResult } from './capture';
import { Lock } from './lock';
import {
  type PaymentState,
  type SubOperation,
  applyProviderEvent,
  applyProviderPayment,
  findSubOperation,
  isClosedStatus,
  refundable,
  reviewSatisfied,
  setStatus,
} from './payment-state';
import { failureType, messageOf, reconcileWorkflow } from './reconcile';
import { refundWorkflow, type RefundResult } from './refund';

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
  let capabilities: ProviderCapabilities | undefined = carried?.capabilities;
  let reconcileRunning = false;
  let reconcileWanted = false;

  const publish = () => {
    upsertSearchAttributes([{ key: PaymentStatusAttr, value: state.view.status }]);
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
      // Early answer: the first provider call's result, or the pending view after a short wait (then 202).
      await condition(() => state.firstCallSettled, timings.submitWaitMs);
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
    if (reconcileRunning) {
      // The wait-and-check ends early: the webhook told us what a lookup would have.
      await getExternalWorkflowHandle(reconcileWorkflowId(input.merchantId, 'create', input.key))
        .signal(reconcileResolvedSignal, event.payment)
        .catch(() => undefined);
    }
  });

  setHandler(ensureReconcileSignal, () => {
    if (state.view.status === 'unknown' && !reconcileRunning) reconcileWanted = true;
  });

  /**
   * Capture and refund share one shape: a repeat of a known key answers without a new effect, a new key is checked
   * against the state under the lock (validators run before the lock, so concurrent updates are checked again), then
   * runs as a child workflow under its own key.
   */
  const moneyMovement = <A extends { readonly fingerprint: string; readonly amount?: number }>(
    kind: SubOperation['kind'],
    keyOf: (args: A) => string,
    assertAllowed: (args: A) => void,
    start: (args: A, key: string, amount: number) => Promise<CaptureResult | RefundResult>,
  ) => ({
    handler: (args: A) =>
      lock.run(async () => {
        const key = keyOf(args);
        if (findSubOperation(state, kind, key)) return state.view; // a repeat: same answer, no new effect
        assertAllowed(args);
        const amount = args.amount ?? state.view.amountAuthorized - state.view.amountCaptured;
        const op: SubOperation = { kind, key, fingerprint: args.fingerprint, amount, state: 'running' };
        state.subOperations.push(op);
        settleSubOperation(op, await start(args, key, amount));
        return state.view;
      }),
    validator: (args: A) => {
      const earlier = findSubOperation(state, kind, keyOf(args));
      if (earlier) {
        if (earlier.fingerprint !== args.fingerprint) throw keyReused(kind);
        return;
      }
      assertAllowed(args);
    },
  });
  const movementInput = (key: string, amount: number) => ({
    merchantId: input.merchantId,
    key,
    provider: request.provider,
    reference: request.orderId,
    paymentId: state.view.providerPaymentId as string,
    amount,
    capabilities: requireCapabilities(capabilities),
    timings,
    retry: input.retry,
  });

  const capture = moneyMovement(
    'capture',
    (args: CaptureArgs) => args.captureKey,
    (args) => assertCapturable(state, args.amount),
    (_args, key, amount) =>
      executeChild(captureWorkflow, {
        workflowId: captureWorkflowId(input.merchantId, key),
        args: [{ ...movementInput(key, amount), amountCapturedBefore: state.view.amountCaptured }],
      }),
  );
  setHandler(captureUpdate, capture.handler, { validator: capture.validator });

  const refund = moneyMovement(
    'refund',
    (args: RefundArgs) => args.refundKey,
    (args) => assertRefundable(state, args.amount),
    (_args, key, amount) =>
      executeChild(refundWorkflow, {
        workflowId: refundWorkflowId(input.merchantId, key),
        args: [{ ...movementInput(key, amount), amountRefundedBefore: state.view.amountRefunded }],
      }),
  );
  setHandler(refundUpdate, refund.handler, { validator: refund.validator });

  setHandler(
    resolveUpdate,
    (args) => {
      const review = state.pendingReview;
      if (!review) return state.view;
      log.info('operator resolved a payment under review', { operation: review.operation, outcome: args.outcome });
      if (args.outcome === 'succeeded') {
        if (review.operation === 'create') {
          if (args.providerPaymentId) state.view.providerPaymentId = args.providerPaymentId;
          state.view.amountAuthorized = state.view.amount.value;
          if (request.capture === 'automatic') state.view.amountCaptured = state.view.amount.value;
        } else if (review.operation === 'capture') {
          state.view.amountCaptured = review.expectAtLeast;
        } else {
          state.view.amountRefunded = review.expectAtLeast;
        }
      }
      const after: PaymentStatus =
        args.outcome === 'failed'
          ? review.operation === 'create'
            ? 'failed'
            : review.statusBefore
          : review.operation === 'create' && request.capture === 'manual'
            ? 'authorized'
            : 'succeeded';
      for (const op of state.subOperations)
        if (op.state === 'needs_review') op.state = args.outcome === 'succeeded' ? 'done' : 'rejected';
      state.pendingReview = undefined;
      transition(after);
      return state.view;
    },
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

  function settleSubOperation(op: SubOperation, result: CaptureResult | RefundResult) {
    if (result.outcome === 'done') {
      op.state = 'done';
      learn(result.payment);
    } else if (result.outcome === 'rejected') {
      op.state = 'rejected';
      op.reason = result.reason;
    } else {
      op.state = 'needs_review';
      op.reason = result.reason;
      state.pendingReview = {
        operation: op.kind,
        key: op.key,
        amount: op.amount,
        expectAtLeast:
          op.kind === 'capture' ? state.view.amountCaptured + op.amount : state.view.amountRefunded + op.amount,
        statusBefore: state.view.status,
      };
      transition('needs_review', result.reason);
    }
  }

  // ---- main line ----
  upsertSearchAttributes([
    { key: PaymentStatusAttr, value: state.view.status },
    { key: MerchantIdAttr, value: input.merchantId },
    { key: OrderIdAttr, value: request.orderId },
    { key: ProviderAttr, value: request.provider },
  ]);
  capabilities ??= await describeProvider(request.provider);
  const acts = providerActivities(workflowInfo().taskQueue, request.provider, capabilities, input.retry);

  if (!carried) {
    state.firstSentAtMs = Date.now();
    try {
      const result = await acts.write.createPayment({
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
      if (failureType(err) === ErrorType.ProviderRejected && state.view.status === 'pending') {
        // The provider said no: nothing happened, so this is a real failure, not a guess.
        transition('failed');
        log.warn('charge rejected by provider', { reason: messageOf(err) });
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
      await condition(() => reconcileWanted || state.view.status !== 'unknown');
      continue;
    }
    if (status === 'needs_review') {
      await condition(() => state.view.status !== 'needs_review' || workflowInfo().continueAsNewSuggested);
    } else if (status === 'authorized') {
      state.authorizationExpiresAtMs ??= Date.now() + timings.authorizationExpiryMs;
      const remaining = state.authorizationExpiresAtMs - Date.now();
      if (remaining <= 0) {
        await lock.run(() => voidExpiredAuthorization());
        continue;
      }
      await condition(() => state.view.status !== 'authorized' || workflowInfo().continueAsNewSuggested, remaining);
    } else if (status === 'succeeded') {
      state.refundWindowEndsAtMs ??= Date.now() + timings.refundWindowMs;
      const remaining = state.refundWindowEndsAtMs - Date.now();
      if (remaining <= 0 && !state.subOperations.some((o) => o.state === 'running')) break;
      await condition(
        () => state.view.status !== 'succeeded' || workflowInfo().continueAsNewSuggested,
        Math.max(remaining, 1),
      );
    } else if (isClosedStatus(status) || status === 'pending') {
      break;
    }
    if (workflowInfo().continueAsNewSuggested) {
      await condition(allHandlersFinished);
      // The memo carries the fingerprint the client compares on closed runs: keep it on the new run.
      await makeContinueAsNewFunc<typeof chargeWorkflow>({ memo: workflowInfo().memo })(input, { state, capabilities });
    }
  }
  await condition(allHandlersFinished);
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
    try {
      const voided = await acts.write.voidPayment({
        provider: request.provider,
        merchantId: input.merchantId,
        key: `${input.key}:void`,
        paymentId,
      });
      learn(voided);
    } catch (err) {
      // A void that fails leaves an authorization that lapses at the provider on its own; record it for an operator.
      state.pendingReview = {
        operation: 'capture',
        key: `${input.key}:void`,
        amount: 0,
        expectAtLeast: Number.MAX_SAFE_INTEGER,
        statusBefore: 'authorized',
      };
      transition('needs_review', `void after authorization expiry failed: ${messageOf(err)}`);
    }
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

function assertCapturable(state: PaymentState, amount: number | undefined) {
  const v = state.view;
  if (v.status !== 'authorized') throw invalid(`Only an authorized payment can be captured; this one is ${v.status}`);
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
