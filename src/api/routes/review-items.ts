import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { PaymentsClient } from '../../client';
import {
  ApiError,
  ListReviewItemsQuery,
  ResolveReviewItemBody,
  ReviewItemList,
  ReviewItemParams,
  ReviewItemView,
} from '../../domain/api-schemas';

/** Options of {@link reviewItemRoutes}. */
export interface ReviewItemRoutesOptions {
  readonly client: PaymentsClient;
}

const tags = ['review items'];
const errors = { 400: ApiError, 401: ApiError, 403: ApiError, 404: ApiError, 503: ApiError };

/** The resolved item as the resolve route answers it: for an item without a merchant (operators only) no `merchantId`. */
export const ResolvedReviewItem = ReviewItemView.extend({
  merchantId: z
    .string()
    .optional()
    .describe('The merchant the item is attributed to; absent for an item without a merchant (operators only).'),
});

/** The path of a review item. */
export const reviewItemPath = (id: string): string => `/v1/review-items/${encodeURIComponent(id)}`;

/**
 * `/v1/review-items...`: the provider payments the reconcile sweep flagged (orphan charges, disagreements), as the
 * merchant the bearer token maps to sees them.
 */
export const reviewItemRoutes: FastifyPluginAsyncZod<ReviewItemRoutesOptions> = async (app, { client }) => {
  app.get(
    '/v1/review-items',
    {
      schema: {
        operationId: 'listReviewItems',
        summary: 'The merchant’s review items from Temporal visibility (eventually consistent), newest first',
        description:
          'Provider payments the reconcile sweep flagged for a decision: `orphan` (no payment of ours accounts for ' +
          'it) and `disagreement` (ours says otherwise). Open items only unless `open=false`. An item is the ' +
          'merchant’s when our matched payment is, or when the provider payment’s metadata names the merchant; items ' +
          'with no merchant are for operators only (the Temporal web UI, `PaymentStatus = needs_review`) and never ' +
          'listed here. Merchant tokens only (an operator token is 403).',
        tags,
        querystring: ListReviewItemsQuery,
        response: { 200: ReviewItemList, ...errors },
      },
    },
    async (request) => {
      const { open, pageToken, pageSize } = request.query;
      return client.listReviewItems(request.merchantId, {
        open: open !== 'false',
        ...(pageToken === undefined ? {} : { pageToken }),
        ...(pageSize === undefined ? {} : { pageSize }),
      });
    },
  );

  app.post(
    '/v1/review-items/:id/resolve',
    {
      schema: {
        operationId: 'resolveReviewItem',
        summary: 'Record what was done about an open review item; the item is then resolved',
        description:
          '200 with the resolved item. A merchant token resolves the merchant’s own items: 404 for a missing item, ' +
          'another merchant’s and one without a merchant, exactly alike; the caller is recorded as `api:<merchantId>`. ' +
          'An operator token resolves any item, including those without a merchant (answered without `merchantId`), ' +
          'recorded as `operator:<operatorId>`. 409 when the item is already resolved (or was closed otherwise).',
        tags,
        params: ReviewItemParams,
        body: ResolveReviewItemBody,
        response: { 200: ResolvedReviewItem, ...errors, 409: ApiError },
      },
      config: { roles: ['merchant', 'operator'] },
    },
    async (request) =>
      request.operatorId === ''
        ? client.resolveReviewItem(request.merchantId, request.params.id, request.body, `api:${request.merchantId}`)
        : client.resolveReviewItemAsOperator(request.params.id, request.body, `operator:${request.operatorId}`),
  );
};
