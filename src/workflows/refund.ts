import { type MoneyMovementInput, type MoneyMovementResult, moveMoney } from './money-movement';

export type RefundInput = MoneyMovementInput & { readonly amountRefundedBefore: number };
export type RefundResult = MoneyMovementResult;

/** Refunds part or all of a captured payment under the refund's own key; unknown outcomes reconcile. */
export async function refundWorkflow(input: RefundInput): Promise<RefundResult> {
  return moveMoney('refund', input, input.amountRefundedBefore);
}
