/**
 * Review items: a provider payment the sweep found that no payment of ours accounts for, or that disagrees with ours,
 * kept in a small workflow an operator finds (`PaymentStatus = 'needs_review'`) and resolves.
 */
import { defineQuery, defineUpdate } from '@temporalio/workflow';
import { z } from 'zod';
import type { ProviderPayment } from './definitions';
import type { PaymentStatus } from './payment';
import type { OrphanReason } from './sweep';

/** Input of `reviewItemWorkflow`: everything an operator needs to decide, and no customer data. */
export interface ReviewItemInput {
  readonly provider: string;
  readonly providerPaymentId: string;
  /** The provider's `reference`: our order id when the payment is ours. */
  readonly reference: string;
  readonly kind: 'orphan' | 'disagreement';
  /** Orphans only. */
  readonly orphanReason?: OrphanReason;
  /** One line for the operator. */
  readonly detail: string;
  /** The provider payment as the sweep saw it. */
  readonly payment: ProviderPayment;
  /** The merchant, from our matched payment or the payment's `metadata.merchant_id`. */
  readonly merchantId?: string;
  /** Our matched payment (disagreements, second charges). */
  readonly ours?: {
    readonly workflowId: string;
    readonly status: PaymentStatus;
    readonly amount: number;
    readonly currency: string;
  };
  /** The sweep run that raised it. */
  readonly flaggedBy: string;
}

/** What the operator did about it. */
export const ResolveReviewItemRequest = z.strictObject({
  action: z.enum(['refunded_at_provider', 'voided_at_provider', 'attributed', 'no_action']),
  note: z
    .string()
    .trim()
    .min(1, { message: 'note must not be empty' })
    .max(1000, { message: 'note must be at most 1000 characters' }),
  /** Who resolved it (audit trail; an operator id, never customer data). */
  operator: z.string().min(1).max(128).optional(),
});
export type ResolveReviewItemRequest = z.infer<typeof ResolveReviewItemRequest>;

/** A review item's state: its query answer and its result. */
export interface ReviewItemState {
  readonly input: ReviewItemInput;
  readonly flaggedAt: string;
  resolution?: ResolveReviewItemRequest & { readonly resolvedAt: string };
}

/** `review:<provider>:<providerPaymentId>`: at most one item per provider payment, however many sweeps see it. */
export const reviewItemWorkflowId = (provider: string, providerPaymentId: string): string =>
  `review:${provider}:${providerPaymentId}`;

/** The review item's state. */
export const reviewItemQuery = defineQuery<ReviewItemState>('reviewItem');

/** An operator resolves the item; the workflow then completes. Validated against the schema before it is accepted. */
export const resolveReviewItemUpdate = defineUpdate<ReviewItemState, [ResolveReviewItemRequest]>('resolveReviewItem');
