/** Visibility queries and page tokens for `PaymentsClient.list` and `.listReviewItems`, scoped to one merchant. */
import type { RawWorkflowExecutionInfo } from '@temporalio/client';
import { defaultPayloadConverter } from '@temporalio/common';
import type { PaymentStatus } from '../domain/payment';
import { PaymentStatusAttr } from '../domain/search-attributes';

/** The workflow type of a payment; other workflows (captures, reconciles, parked events) never list as payments. */
export const chargeWorkflowType = 'chargeWorkflow';

/**
 * Whether a value can be matched in a visibility query. Temporal's query parser takes `''` for a quote inside a
 * literal, but keeps backslashes verbatim after lexing them as escapes, and values with `"` never match: such values
 * cannot be expressed, so they are refused rather than silently matching nothing (or something else).
 */
export const isVisibilityLiteral = (value: string): boolean => !/[\\"]/.test(value);

/** A visibility-query string literal: single-quoted, quotes doubled. Throws on a value {@link isVisibilityLiteral} refuses. */
export const quoteLiteral = (value: string): string => {
  if (!isVisibilityLiteral(value))
    throw new TypeError('a visibility literal cannot contain a backslash or a double quote');
  return `'${value.replace(/'/g, "''")}'`;
};

/** Filters of a payment list. */
export interface PaymentFilter {
  readonly status?: PaymentStatus;
  readonly orderId?: string;
}

/**
 * The visibility query of one merchant's payments. Runs that continued as new are left out: the chain's open run
 * stands for the payment, so a payment is listed once.
 */
export function paymentListQuery(merchantId: string, filter: PaymentFilter = {}): string {
  const clauses = [
    `WorkflowType = ${quoteLiteral(chargeWorkflowType)}`,
    `MerchantId = ${quoteLiteral(merchantId)}`,
    `ExecutionStatus != 'ContinuedAsNew'`,
  ];
  if (filter.status !== undefined) clauses.push(`PaymentStatus = ${quoteLiteral(filter.status)}`);
  if (filter.orderId !== undefined) clauses.push(`OrderId = ${quoteLiteral(filter.orderId)}`);
  return clauses.join(' AND ');
}

/** The charge workflows of one order at one provider, across merchants (webhook matching without metadata). */
export const paymentsByReferenceQuery = (provider: string, reference: string): string =>
  [
    `WorkflowType = ${quoteLiteral(chargeWorkflowType)}`,
    `OrderId = ${quoteLiteral(reference)}`,
    `Provider = ${quoteLiteral(provider)}`,
    `ExecutionStatus != 'ContinuedAsNew'`,
  ].join(' AND ');

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

/** The workflow type of a review item (`review:<provider>:<providerPaymentId>`), raised by the reconcile sweep. */
export const reviewItemWorkflowType = 'reviewItemWorkflow';

/**
 * The visibility query of one merchant's review items. Items without a merchant (no metadata, no matching payment of
 * ours) carry no `MerchantId`, so no merchant's query matches them: they are for operators (web UI) only. `open`: the
 * items still awaiting a decision (`PaymentStatus` is removed on resolve; a terminated item is not open either).
 */
export function reviewItemListQuery(merchantId: string, { open }: { readonly open: boolean }): string {
  const clauses = [
    `WorkflowType = ${quoteLiteral(reviewItemWorkflowType)}`,
    `MerchantId = ${quoteLiteral(merchantId)}`,
  ];
  if (open) clauses.push(`PaymentStatus = 'needs_review'`, `ExecutionStatus = 'Running'`);
  return clauses.join(' AND ');
}

/** Visibility token bytes → the opaque page token the API hands out. */
export const encodePageToken = (token: Uint8Array | null | undefined): string | undefined =>
  token && token.length > 0 ? Buffer.from(token).toString('base64url') : undefined;

/** The API's page token → visibility token bytes. */
export const decodePageToken = (token: string | undefined): Uint8Array | undefined =>
  token === undefined ? undefined : new Uint8Array(Buffer.from(token, 'base64url'));
