/**
 * Review items without zod: their input and state, workflow id, query and update definitions, and the check of an
 * operator's resolution that the review item workflow's update validator runs. Workflow code imports this module;
 * `review-items.ts` re-exports it beside the zod schema the API parses with (test/domain/zod-free.test.ts holds the two
 * to the same verdicts and results).
 */
import { defineQuery, defineUpdate } from '@temporalio/workflow';
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
export const reviewItemActions = ['refunded_at_provider', 'voided_at_provider', 'attributed', 'no_action'] as const;

/** An operator's resolution of a review item (what {@link parseReviewItemResolution} answers). */
export interface ResolveReviewItemRequest {
  action: (typeof reviewItemActions)[number];
  /** Trimmed, 1 to 1000 characters. */
  note: string;
  /** Who resolved it (audit trail; an operator id, never customer data), 1 to 128 characters. */
  operator?: string | undefined;
}

/** What is wrong with one field of a resolution. */
export interface ResolutionIssue {
  /** The field; empty for the resolution itself. */
  readonly path: string;
  readonly message: string;
}

/**
 * Checks an operator's resolution as the API's schema does: an object with exactly `action`, `note` (trimmed, 1 to
 * 1000 characters) and optionally `operator` (1 to 128 characters). Answers the resolution with its note trimmed, or
 * every issue.
 */
export function parseReviewItemResolution(
  value: unknown,
):
  | { readonly ok: true; readonly value: ResolveReviewItemRequest }
  | { readonly ok: false; readonly issues: ResolutionIssue[] } {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return { ok: false, issues: [{ path: '', message: 'a resolution must be an object' }] };
  }
  const v = value as Record<string, unknown>;
  const issues: ResolutionIssue[] = [];
  const action = v.action;
  if (typeof action !== 'string' || !(reviewItemActions as readonly string[]).includes(action)) {
    issues.push({ path: 'action', message: `action must be one of: ${reviewItemActions.join(', ')}` });
  }
  const note = typeof v.note === 'string' ? v.note.trim() : undefined;
  if (note === undefined) issues.push({ path: 'note', message: 'note must be a string' });
  else if (note.length < 1) issues.push({ path: 'note', message: 'note must not be empty' });
  else if (note.length > 1000) issues.push({ path: 'note', message: 'note must be at most 1000 characters' });
  const operator = v.operator;
  if (operator !== undefined && (typeof operator !== 'string' || operator.length < 1 || operator.length > 128)) {
    issues.push({ path: 'operator', message: 'operator must be a string of 1 to 128 characters' });
  }
  for (const key of Object.keys(v)) {
    if (key !== 'action' && key !== 'note' && key !== 'operator') {
      issues.push({ path: '', message: `unrecognized key: ${key}` });
    }
  }
  if (issues.length > 0) return { ok: false, issues };
  return {
    ok: true,
    value: {
      action: action as ResolveReviewItemRequest['action'],
      note: note as string,
      ...(operator === undefined ? {} : { operator: operator as string }),
    },
  };
}

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
