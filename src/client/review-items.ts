/**
 * Review items (the reconcile sweep's orphan charges and disagreements): pages of a merchant's items from Temporal
 * visibility, an owner's or an operator's resolution (the item's update), and the items as the API shows them.
 */
import { type WorkflowExecutionDescription, type WorkflowHandle, WorkflowNotFoundError } from '@temporalio/client';
import { ResolveReviewItemBody, ReviewItemId, type ReviewItemStatus, type ReviewItemView } from '../domain/api-schemas';
import { parseChargeWorkflowId } from '../domain/ids';
import { MerchantId } from '../domain/payment';
import { type ReviewItemState, resolveReviewItemUpdate, reviewItemQuery } from '../domain/review-items';
import { MerchantIdAttr } from '../domain/search-attributes';
import { decodePageToken, encodePageToken, reviewItemListQuery, reviewItemWorkflowType } from '../visibility';
import type { reviewItemWorkflow } from '../workflows';
import { type ClientContext, bounded } from './context';
import { InvalidTransition, ReviewItemNotFound } from './errors';
import { closedBeforeUpdate, parseOrThrow, translateUpdateFailure } from './failures';

type ReviewItemHandle = WorkflowHandle<typeof reviewItemWorkflow>;

/** `temporal.api.enums.v1.WorkflowExecutionStatus` values of a visibility listing. */
const ExecutionStatus = { Running: 1, Completed: 2 } as const;

/** Options of `PaymentsClient.listReviewItems`. */
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

/**
 * One page of the merchant's review items from Temporal visibility, open ones only unless `open: false`. Items without
 * a merchant are for operators and never listed.
 */
export async function listReviewItems(
  ctx: ClientContext,
  merchantId: string,
  options: ReviewItemListOptions = {},
): Promise<ReviewItemPage> {
  const merchant = parseOrThrow(MerchantId, merchantId, 'merchantId');
  const response = await bounded(ctx, () =>
    ctx.client.workflowService.listWorkflowExecutions({
      namespace: ctx.namespace,
      query: reviewItemListQuery(merchant, { open: options.open ?? true }),
      pageSize: options.pageSize ?? 20,
      nextPageToken: decodePageToken(options.pageToken),
    }),
  );
  const views = await bounded(ctx, () =>
    Promise.all(
      response.executions.map(async ({ execution, status }) => {
        if (!execution?.workflowId) return undefined;
        const state = await reviewItemState(
          ctx,
          execution.workflowId,
          execution.runId ?? undefined,
          status === ExecutionStatus.Completed,
        );
        return state && reviewItemView(execution.workflowId, state, status === ExecutionStatus.Running);
      }),
    ),
  );
  const nextPageToken = encodePageToken(response.nextPageToken);
  return {
    // Defence in depth: the query is scoped already.
    items: views.filter((v): v is ReviewItemView => v !== undefined && v.merchantId === merchant),
    ...(nextPageToken === undefined ? {} : { nextPageToken }),
  };
}

/**
 * Resolves one of the merchant's open review items (its `resolveReviewItem` update) and answers the resolved item.
 * {@link ReviewItemNotFound} for a missing item, another merchant's and one without a merchant;
 * {@link InvalidTransition} when it is already resolved (or was closed otherwise).
 */
export async function resolveReviewItem(
  ctx: ClientContext,
  merchantId: string,
  itemId: string,
  body: unknown,
  operator?: string,
): Promise<ReviewItemView> {
  const merchant = parseOrThrow(MerchantId, merchantId, 'merchantId');
  const { id, state } = await resolveItem(ctx, merchant, itemId, body, operator);
  const view = reviewItemView(id, state, false);
  if (!view) throw new ReviewItemNotFound(); // unreachable: it carried the merchant's id
  return view;
}

/**
 * An operator resolves any open review item, with or without a merchant; `operator` is recorded as who decided
 * (the API passes `operator:<operatorId>`). {@link ReviewItemNotFound} for a missing item;
 * {@link InvalidTransition} when it is already resolved (or was closed otherwise).
 */
export async function resolveReviewItemAsOperator(
  ctx: ClientContext,
  itemId: string,
  body: unknown,
  operator: string,
): Promise<OperatorReviewItemView> {
  const { id, state } = await resolveItem(ctx, null, itemId, body, operator);
  return operatorReviewItemView(id, state, false);
}

/** Resolves an item the owner may see (`null`: an operator, who sees every item) and answers its new state. */
async function resolveItem(
  ctx: ClientContext,
  owner: string | null,
  itemId: string,
  body: unknown,
  operator: string | undefined,
): Promise<{ id: string; state: ReviewItemState }> {
  const id = parseOrThrow(ReviewItemId, itemId, 'id');
  const request = parseOrThrow(ResolveReviewItemBody, body);
  const handle: ReviewItemHandle = ctx.client.workflow.getHandle<typeof reviewItemWorkflow>(id);
  // Ownership first (a foreign item answers exactly like a missing one), from the item's search attributes.
  const closed = await reviewItemClosedStatus(ctx, handle, owner);
  if (closed === 'COMPLETED') throw new InvalidTransition('This review item is already resolved');
  if (closed !== undefined) throw new InvalidTransition(`This review item is closed (${closed.toLowerCase()})`);
  try {
    const state = await bounded(ctx, () =>
      handle.executeUpdate(resolveReviewItemUpdate, {
        args: [{ ...request, ...(operator === undefined ? {} : { operator }) }],
      }),
    );
    return { id, state };
  } catch (err) {
    // Its validator refuses a second resolve (InvalidTransition); a run that closed meanwhile refuses any update.
    if (!(err instanceof WorkflowNotFoundError) && !closedBeforeUpdate(err)) throw translateUpdateFailure(err);
    const now = await reviewItemClosedStatus(ctx, handle, owner);
    if (now === undefined) throw err;
    throw new InvalidTransition(
      now === 'COMPLETED'
        ? 'This review item is already resolved'
        : `This review item is closed (${now.toLowerCase()})`,
      { cause: err },
    );
  }
}

/** The item's state: its result once completed (no replay needed), else its query; undefined when it is gone. */
async function reviewItemState(
  ctx: ClientContext,
  workflowId: string,
  runId: string | undefined,
  completed: boolean,
): Promise<ReviewItemState | undefined> {
  const handle = ctx.client.workflow.getHandle<typeof reviewItemWorkflow>(workflowId, runId);
  try {
    return completed ? await handle.result() : await handle.query(reviewItemQuery);
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return undefined; // deleted since it was listed
    throw err;
  }
}

/**
 * Undefined while the item is running, else how it closed (`COMPLETED` = resolved); throws {@link ReviewItemNotFound}
 * unless the item exists and carries this merchant's `MerchantId` (any item for `null`, an operator).
 */
async function reviewItemClosedStatus(
  ctx: ClientContext,
  handle: ReviewItemHandle,
  merchant: string | null,
): Promise<string | undefined> {
  let description: WorkflowExecutionDescription;
  try {
    description = await bounded(ctx, () => handle.describe());
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) throw new ReviewItemNotFound({ cause: err });
    throw err;
  }
  if (
    description.type !== reviewItemWorkflowType ||
    (merchant !== null && description.typedSearchAttributes.get(MerchantIdAttr) !== merchant)
  ) {
    throw new ReviewItemNotFound();
  }
  return description.status.name === 'RUNNING' ? undefined : description.status.name;
}
