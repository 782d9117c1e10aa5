import { executeChild, workflowInfo } from '@temporalio/workflow';
import { ErrorType } from '../domain/errors';
import { reconcileWorkflowId } from '../domain/ids';
import type { RetryOverrides } from '../domain/retry';
import type { PaymentTimings } from '../domain/workflow-inputs';
import type { ProviderCapabilities, ProviderPayment } from '../providers/types';
import { providerActivities } from './activity-options';
import { failureType, messageOf, reconcileWorkflow } from './reconcile';

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
}

/** How a capture or refund ended: done (with the provider's payment), rejected by the provider, or for review. */
export type MoneyMovementResult =
  | { readonly outcome: 'done'; readonly payment: ProviderPayment }
  | { readonly outcome: 'rejected'; readonly reason: string }
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
    if (failureType(err) === ErrorType.ProviderRejected) return { outcome: 'rejected', reason: messageOf(err) };
  }
  const atLeast = totalBefore + input.amount;
  const result = await executeChild(reconcileWorkflow, {
    workflowId: reconcileWorkflowId(input.merchantId, kind, input.key),
    args: [
      {
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
        retry: input.retry,
      },
    ],
  });
  if (result.outcome === 'found') return { outcome: 'done', payment: result.payment };
  if (result.outcome === 'needs_review') return { outcome: 'needs_review', reason: result.reason };
  return { outcome: 'rejected', reason: result.outcome === 'rejected' ? result.reason : result.declineCode };
}
