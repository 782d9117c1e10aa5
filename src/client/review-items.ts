/** Review items as the API shows them: the item workflow's state, scoped to one merchant. */
import type { ReviewItemStatus, ReviewItemView } from '../domain/api-schemas';
import { parseChargeWorkflowId } from '../domain/ids';
import type { ReviewItemState } from '../domain/review-items';

/** Options of {@link PaymentsClient.listReviewItems}. */
export interface ReviewItemListOptions {
  readonly pageToken?: string;
  readonly pageSize?: number;
  /** Only items awaiting a decision (default true); false lists resolved and closed items too. */
  readonly open?: boolean;
}

/** A page of review items, newest first; `nextPageToken` when there are more. */
export interface ReviewItemPage {
  readonly items: ReviewItemView[];
  readonly nextPageToken?: string;
}

/** A review item as an operator sees it: `merchantId` is absent for an item without a merchant. */
export type OperatorReviewItemView = Omit<ReviewItemView, 'merchantId'> & { merchantId?: string };

/**
 * The merchant's view of a review item, or undefined for an item without a merchant (operators only). `running`: the
 * item's workflow is still open; an item closed without a resolution was terminated.
 */
export function reviewItemView(id: string, state: ReviewItemState, running: boolean): ReviewItemView | undefined {
  const { merchantId } = state.input;
  if (merchantId === undefined) return undefined;
  return { ...operatorReviewItemView(id, state, running), merchantId };
}

/** An operator's view of any review item, with or without a merchant. */
export function operatorReviewItemView(id: string, state: ReviewItemState, running: boolean): OperatorReviewItemView {
  const { input } = state;
  const status: ReviewItemStatus = state.resolution ? 'resolved' : running ? 'open' : 'closed';
  const ours = input.ours ? parseChargeWorkflowId(input.ours.workflowId) : null;
  const metadata = input.payment.metadata;
  // The metadata's key only when the metadata names this merchant: it is what the sweep attributed the item by.
  const claimedKey =
    metadata !== undefined && input.merchantId !== undefined && metadata.merchant_id === input.merchantId
      ? metadata.payment_key
      : undefined;
  const paymentKey = ours?.key ?? claimedKey;
  return {
    id,
    ...(input.merchantId === undefined ? {} : { merchantId: input.merchantId }),
    provider: input.provider,
    providerPaymentId: input.providerPaymentId,
    kind: input.kind,
    ...(input.orphanReason === undefined ? {} : { orphanReason: input.orphanReason }),
    detail: input.detail,
    reference: input.reference,
    amount: { value: input.payment.amount, currency: input.payment.currency },
    providerStatus: input.payment.status,
    providerCreatedAt: new Date(input.payment.created * 1000).toISOString(),
    ...(paymentKey === undefined ? {} : { paymentKey }),
    ...(input.ours && ours
      ? {
          payment: {
            key: ours.key,
            status: input.ours.status,
            amount: { value: input.ours.amount, currency: input.ours.currency },
          },
        }
      : {}),
    status,
    ...(state.resolution
      ? {
          resolution: {
            action: state.resolution.action,
            note: state.resolution.note,
            ...(state.resolution.operator === undefined ? {} : { operator: state.resolution.operator }),
            resolvedAt: state.resolution.resolvedAt,
          },
        }
      : {}),
    createdAt: state.flaggedAt,
  };
}
