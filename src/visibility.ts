/**
 * Every visibility query of the project, built here and nowhere else: the client's payment and review-item lists, its
 * one-open-payment-per-order check and webhook matching by reference, and the reconcile sweep's stuck-payment and
 * by-reference lookups. Values are quoted by {@link quoteLiteral}; page tokens are the API's opaque form of
 * visibility's. Pure string work over the domain's search attributes: the client and the sweep's activities import it.
 */
import type { PaymentStatus } from './domain/payment';
import { UnknownSinceAttr } from './domain/search-attributes';

/** The workflow type of a payment; other workflows (captures, reconciles, parked events) never list as payments. */
export const chargeWorkflowType = 'chargeWorkflow';

/** The workflow type of a review item (`review:<provider>:<providerPaymentId>`), raised by the reconcile sweep. */
export const reviewItemWorkflowType = 'reviewItemWorkflow';

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

/**
 * One merchant's running payments of one order in one of `statuses` (the one-open-payment-per-order check: `pending`
 * and `unknown`, then `needs_review`).
 */
export const openPaymentsOfOrderQuery = (
  merchantId: string,
  orderId: string,
  statuses: readonly PaymentStatus[],
): string =>
  [
    paymentListQuery(merchantId, { orderId }),
    `ExecutionStatus = 'Running'`,
    `PaymentStatus IN (${statuses.map(quoteLiteral).join(', ')})`,
  ].join(' AND ');

/**
 * The charge workflows of one order at one provider, across merchants: webhook matching without metadata (any task
 * queue), or the sweep's attribution (its own task queue only).
 */
export const paymentsByReferenceQuery = (provider: string, reference: string, taskQueue?: string): string =>
  [
    `WorkflowType = ${quoteLiteral(chargeWorkflowType)}`,
    ...(taskQueue === undefined ? [] : [`TaskQueue = ${quoteLiteral(taskQueue)}`]),
    `OrderId = ${quoteLiteral(reference)}`,
    `Provider = ${quoteLiteral(provider)}`,
    `ExecutionStatus != 'ContinuedAsNew'`,
  ].join(' AND ');

/**
 * Charge workflows of one task queue running in `unknown` and unknown since before the cutoff, as a superset that the
 * sweep narrows with the payment's query (`unknownSince`, visibility lags). A run that became unknown itself started
 * before it did, so `StartTime < cutoff` holds for it; a run that continued as new while unknown started later than the
 * payment became unknown, and publishes `UnknownSince` at its start instead (its `StartTime` would hide it).
 */
export const stuckUnknownQuery = (taskQueue: string, unknownCutoffMs: number): string => {
  const cutoff = quoteLiteral(new Date(unknownCutoffMs).toISOString());
  return [
    `WorkflowType = ${quoteLiteral(chargeWorkflowType)}`,
    `TaskQueue = ${quoteLiteral(taskQueue)}`,
    `ExecutionStatus = 'Running'`,
    `PaymentStatus = 'unknown'`,
    `(StartTime < ${cutoff} OR ${UnknownSinceAttr.name} < ${cutoff})`,
  ].join(' AND ');
};

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
