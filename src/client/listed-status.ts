/** Reads a listed execution's `PaymentStatus` without asking the workflow (the order check's one visibility list). */
import type { RawWorkflowExecutionInfo } from '@temporalio/client';
import { defaultPayloadConverter } from '@temporalio/common';
import { PaymentStatusAttr } from '../domain/search-attributes';

/**
 * The `PaymentStatus` search attribute of a listed execution (a keyword: JSON in its payload); undefined when it has
 * none or it does not decode.
 */
export function paymentStatusOf(execution: RawWorkflowExecutionInfo): string | undefined {
  const payload = execution.searchAttributes?.indexedFields?.[PaymentStatusAttr.name];
  if (!payload) return undefined;
  try {
    const value: unknown = defaultPayloadConverter.fromPayload(payload);
    return typeof value === 'string' ? value : undefined;
  } catch {
    return undefined;
  }
}
