import { executeChild, workflowInfo } from '@temporalio/workflow';
import { ErrorType } from '../domain/errors';
import { reconcileWorkflowId } from '../domain/ids';
import type { ReconcileInput } from '../domain/operations';
import type { RetryOverrides } from '../domain/retry';
import type { PaymentTimings } from '../domain/workflow-inputs';
import type { ProviderCapabilities, ProviderPayment } from '../domain/provider-payment';
import { providerActivities } from './activity-options';
import { failureType, messageOf, neverSent, notSentReason, providerCodeOf, waitAskedOf } from './failures';
import { reconcileWorkflow } from './reconcile';

/** Input shared by `captureWorkflow` and `refundWorkflow`: one money movement on an existing payment. */
export interface MoneyMovementInput {
  readonly merchantId: string;
  /** The capture's or refund's own idempotency key. */
  readonly key: string;
  readonly provider: string;
  readonly reference: string;
  readonly paymentId: string;
  readonly amount: number;
  readonly capabilities: ProviderCapabilities;
  readonly timings: PaymentTimings;
  readonly retry?: RetryOverrides;
  /**
   * Set by a payment that reconciles an unknown outcome itself: the child then makes only the first call and answers
   * `unknown`, so the payment's update can answer as soon as that call settled. Absent in children started before this
   * existed (they reconcile inside, as recorded in their histories).
   */
  readonly firstCallOnly?: boolean;
}

/**
 * How a capture or refund ended: done (with the provider's payment), rejected by the provider, never sent (every
 * attempt refused before it left: nothing happened, the caller may try again after `retryAfterMs`), unknown (a first
 * call only), or for review.
 */
export type MoneyMovementResult =
  | { readonly outcome: 'done'; readonly payment: ProviderPayment }
  | { readonly outcome: 'rejected'; readonly reason: string; readonly providerCode?: string }
  | { readonly outcome: 'not_sent'; readonly reason: string; readonly retryAfterMs?: number }
  | { readonly outcome: 'unknown'; readonly reason: string; readonly firstSentAtMs: number }
  | { readonly outcome: 'needs_review'; readonly reason: string };

/**
 * Sends one capture or refund under its own key; an unknown outcome becomes a reconcile child that checks the
 * provider's totals against `provesDone`, never a blind resend.
 */
export async function moveMoney(
  kind: 'capture' | 'refund',
  input: MoneyMovementInput,
  totalBefore: number,
): Promise<MoneyMovementResult> {
  const acts = providerActivities(workflowInfo().taskQueue, input.provider, input.capabilities, input.retry);
  const firstSentAtMs = Date.now();
  const common = { provider: input.provider, merchantId: input.merchantId, key: input.key, paymentId: input.paymentId };
  try {
    // The totals before this write let a provider without keys recognise its own earlier effect on a resend.
    const payment =
      kind === 'capture'
        ? await acts.write.capturePayment({ ...common, amount: input.amount, amountCapturedBefore: totalBefore })
        : (await acts.write.refundPayment({ ...common, amount: input.amount, amountRefundedBefore: totalBefore }))
            .payment;
    return { outcome: 'done', payment };
  } catch (err) {
    if (failureType(err) === ErrorType.ProviderRejected) {
      const code = providerCodeOf(err);
      return { outcome: 'rejected', reason: messageOf(err), ...(code === undefined ? {} : { providerCode: code }) };
    }
    if (input.firstCallOnly) return firstCallFailed(err, firstSentAtMs);
  }
  const result = await executeChild(reconcileWorkflow, {
    workflowId: reconcileWorkflowId(input.merchantId, kind, input.key),
    args: [movementReconcileInput(kind, input, totalBefore, firstSentAtMs)],
  });
  if (result.outcome === 'found') return { outcome: 'done', payment: result.payment };
  if (result.outcome === 'needs_review') return { outcome: 'needs_review', reason: result.reason };
  return { outcome: 'rejected', reason: result.outcome === 'rejected' ? result.reason : result.declineCode };
}

/**
 * A first call that failed without an answer: never sent when the activity's final failure proves no attempt left
 * (breaker open, cool-down, refused connection: a refusal, not an unknown outcome), else unknown. Only a first call
 * answers `not_sent`: a child that reconciles inside (started before first calls existed) keeps doing so.
 */
function firstCallFailed(err: unknown, firstSentAtMs: number): MoneyMovementResult {
  if (!neverSent(err)) return { outcome: 'unknown', reason: messageOf(err), firstSentAtMs };
  const retryAfterMs = waitAskedOf(err);
  return { outcome: 'not_sent', reason: notSentReason(err), ...(retryAfterMs === undefined ? {} : { retryAfterMs }) };
}

/**
 * The reconcile of a capture or refund: the provider's total must reach what it was before plus this amount; found
 * nothing after the settle window, the same request is resent with the same key (where the provider honours keys).
 */
export function movementReconcileInput(
  kind: 'capture' | 'refund',
  input: MoneyMovementInput,
  totalBefore: number,
  firstSentAtMs: number,
): ReconcileInput {
  const atLeast = totalBefore + input.amount;
  return {
    merchantId: input.merchantId,
    key: input.key,
    operation: kind,
    provider: input.provider,
    reference: input.reference,
    paymentId: input.paymentId,
    expect:
      kind === 'capture'
        ? { kind: 'captured', amountCapturedAtLeast: atLeast }
        : { kind: 'refunded', amountRefundedAtLeast: atLeast },
    capabilities: input.capabilities,
    scheduleMs: input.timings.reconcileScheduleMs,
    settleWindowMs: input.timings.settleWindowMs,
    firstSentAtMs,
    ...(input.retry === undefined ? {} : { retry: input.retry }),
    resubmitMovement: { kind, amount: input.amount, totalBefore },
  };
}
