import {
  ApplicationFailure,
  allHandlersFinished,
  condition,
  log,
  setHandler,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import { ErrorType } from '../domain/errors';
import {
  type ReviewItemInput,
  type ReviewItemState,
  parseReviewItemResolution,
  resolveReviewItemUpdate,
  reviewItemQuery,
} from '../domain/review-item-definitions';
import { MerchantIdAttr, OrderIdAttr, PaymentStatusAttr, ProviderAttr } from '../domain/search-attributes';

/**
 * One provider payment an operator must look at (id `review:<provider>:<providerPaymentId>`), raised by the sweep.
 *
 * A workflow of its own rather than the parked-event workflow: a parked event waits for more events and completes
 * after a quiet period by itself, whereas a review item waits for an operator's decision and completes only then. Its
 * id makes it idempotent (the sweep starts it with REJECT_DUPLICATE: a resolved item is not raised again). It shows
 * `PaymentStatus = needs_review` (with `Provider`, `OrderId` and, when known, `MerchantId`) until resolved, so it sits
 * in the web UI filter operators already watch; on resolve the status is removed, so only open items match.
 */
export async function reviewItemWorkflow(input: ReviewItemInput): Promise<ReviewItemState> {
  const state: ReviewItemState = { input, flaggedAt: workflowInfo().startTime.toISOString() };

  setHandler(reviewItemQuery, () => state);
  setHandler(
    resolveReviewItemUpdate,
    (args) => {
      // The validator refused anything that does not parse; here it only trims the note.
      const parsed = parseReviewItemResolution(args);
      if (!parsed.ok) {
        throw ApplicationFailure.create({
          type: ErrorType.ValidationError,
          message: 'invalid resolution',
          nonRetryable: true,
        });
      }
      const resolution = parsed.value;
      state.resolution = { ...resolution, resolvedAt: new Date().toISOString() };
      log.info('operator resolved a review item', { kind: input.kind, action: resolution.action });
      upsertSearchAttributes([{ key: PaymentStatusAttr, value: null }]);
      return state;
    },
    {
      validator: (args) => {
        if (state.resolution) {
          throw ApplicationFailure.create({
            type: ErrorType.InvalidTransition,
            message: 'This review item is already resolved',
            nonRetryable: true,
          });
        }
        const parsed = parseReviewItemResolution(args);
        if (!parsed.ok) {
          throw ApplicationFailure.create({
            type: ErrorType.ValidationError,
            message: parsed.issues.map((i) => `${i.path || '(args)'}: ${i.message}`).join('; '),
            nonRetryable: true,
          });
        }
      },
    },
  );

  // Also set at start by the sweep; upserted here so an item started any other way shows the same.
  upsertSearchAttributes([
    { key: PaymentStatusAttr, value: 'needs_review' },
    { key: ProviderAttr, value: input.provider },
    { key: OrderIdAttr, value: input.reference },
    ...(input.merchantId === undefined ? [] : [{ key: MerchantIdAttr, value: input.merchantId }]),
  ]);

  await condition(() => state.resolution !== undefined);
  await condition(allHandlersFinished);
  return state;
}
