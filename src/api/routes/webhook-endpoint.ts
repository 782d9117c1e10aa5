/**
 * `/v1/webhook-endpoint` (docs/http-api.md#webhooks-to-your-endpoint): the token's merchant sets, reads and removes the
 * endpoint its payments' events are POSTed to. Served over the endpoint table (PostgreSQL); an API without merchant
 * webhooks (no DATABASE_URL, or `MERCHANT_WEBHOOKS=false`) answers 404 on each.
 */
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { ApiError } from '../../domain/api-schemas';
import {
  WebhookEndpointCreated,
  WebhookEndpointRequest,
  WebhookEndpointView,
  isPrivateHost,
} from '../../domain/webhook-endpoints';
import type { WebhookEndpoints } from '../../merchant-webhooks';
import { errorBody } from '../errors';

/** Options of {@link webhookEndpointRoutes}. */
export interface WebhookEndpointRoutesOptions {
  /** The endpoint table; absent: merchant webhooks are not enabled on this API. */
  readonly endpoints: WebhookEndpoints | undefined;
  /** Accept URLs whose host is this machine or a private network (development); production refuses them. */
  readonly allowPrivateUrls: boolean;
}

const tags = ['webhooks'];
const errors = { 401: ApiError, 403: ApiError, 404: ApiError, 503: ApiError };
const notEnabled = errorBody('not_found', 'Merchant webhooks are not enabled on this API');
const path = '/v1/webhook-endpoint';

export const webhookEndpointRoutes: FastifyPluginAsyncZod<WebhookEndpointRoutesOptions> = async (
  app,
  { endpoints, allowPrivateUrls },
) => {
  app.put(
    path,
    {
      schema: {
        operationId: 'setWebhookEndpoint',
        summary: 'Set the endpoint your payments’ events are POSTed to; answers its new signing secret',
        description:
          'Every PUT sets the URL and answers a new secret (`whsec_...`): events are signed with it from now on, ' +
          'including those already queued. A URL that is not absolute http(s) is 400 naming `url`.',
        tags,
        body: WebhookEndpointRequest,
        response: { 200: WebhookEndpointCreated, 400: ApiError, ...errors },
      },
    },
    async (request, reply) => {
      if (endpoints === undefined) return reply.code(404).send(notEnabled);
      const { url } = request.body;
      if (!allowPrivateUrls && isPrivateHost(url)) {
        const message = 'url must not point at this machine or a private network';
        return reply
          .code(400)
          .send(errorBody('validation_error', 'The request is invalid', [{ path: 'url', message }]));
      }
      return endpoints.put(request.merchantId, url);
    },
  );

  app.get(
    path,
    {
      schema: {
        operationId: 'getWebhookEndpoint',
        summary: 'Your webhook endpoint’s URL (never its secret); 404 when none is set',
        tags,
        response: { 200: WebhookEndpointView, ...errors },
      },
    },
    async (request, reply) => {
      if (endpoints === undefined) return reply.code(404).send(notEnabled);
      const found = await endpoints.get(request.merchantId);
      return found ?? reply.code(404).send(errorBody('not_found', 'No webhook endpoint is set'));
    },
  );

  app.delete(
    path,
    {
      schema: {
        operationId: 'deleteWebhookEndpoint',
        summary: 'Stop sending events (those still queued are discarded); 204 also when none was set',
        tags,
        response: { 204: z.null().describe('No content'), ...errors },
      },
    },
    async (request, reply) => {
      if (endpoints === undefined) return reply.code(404).send(notEnabled);
      await endpoints.delete(request.merchantId);
      return reply.code(204).send(null);
    },
  );
};
