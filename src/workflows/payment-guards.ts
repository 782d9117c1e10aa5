/**
 * The rules a capture, refund or resolve is checked against before anything moves, as typed failures (validators and
 * handlers share them), and the status a resolve leads to.
 */
import { ApplicationFailure } from '@temporalio/workflow';
import { ErrorType } from '../domain/errors';
import type { PaymentStatus } from '../domain/payment';
import { type PaymentState, type PendingReview, refundable } from './payment-state';

/** The status an operator's verdict on the reviewed operation leads to. */
export function statusAfterResolve(
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

export function keyReused(what: string) {
  return ApplicationFailure.create({
    type: ErrorType.IdempotencyKeyReused,
    message: `This idempotency key was used for a different ${what} request`,
    nonRetryable: true,
  });
}

export function invalid(message: string) {
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

export function assertCapturable(state: PaymentState, amount: number | undefined) {
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

export function assertRefundable(state: PaymentState, amount: number) {
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

/** A resolve is only for a payment under review. */
export function assertUnderReview(state: PaymentState) {
  if (state.view.status !== 'needs_review') {
    throw ApplicationFailure.create({
      type: ErrorType.InvalidTransition,
      message: `Only a payment in needs_review can be resolved; this one is ${state.view.status}`,
      nonRetryable: true,
    });
  }
}
