import { type MoneyMovementInput, type MoneyMovementResult, moveMoney } from './money-movement';

export type CaptureInput = MoneyMovementInput & { readonly amountCapturedBefore: number };
export type CaptureResult = MoneyMovementResult;

/** Captures (all or part of) an authorized payment under the capture's own key; unknown outcomes reconcile. */
export async function captureWorkflow(input: CaptureInput): Promise<CaptureResult> {
  return moveMoney('capture', input, input.amountCapturedBefore);
}
