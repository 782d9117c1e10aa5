import type { FastifySchemaCompiler } from 'fastify';
import type { FastifyRouteSchemaDef } from 'fastify/types/schema';
import { type FastifyPluginAsyncZod, validatorCompiler } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { EventOwner, PaymentsClient } from '../../client';
import { ownerMetadataKeys } from '../../domain/adoption';
import { ApiError, ProviderParams, WebhookAck } from '../../domain/api-schemas';
import { IdempotencyKey, MerchantId } from '../../domain/payment';
import type { ProviderEvent } from '../../domain/provider-payment';
import type { WebhookVerifier } from '../../domain/webhooks';
import type { ApiMetrics } from '../../metrics/api-metrics';
import { errorBody } from '../errors';

/** Options of {@link webhookRoutes}. */
export interface WebhookRoutesOptions {
  readonly client: PaymentsClient;
  /** One verifier per provider whose webhooks this API accepts, by provider name (the route's `:provider`). */
  readonly verifiers: Readonly<Record<string, WebhookVerifier>>;
  /** Webhook counters (received, refused, applied, duplicate). */
  readonly metrics?: ApiMetrics;
}

/** Our payment named by the event's metadata, when it names one validly. */
export function ownerOf(e: ProviderEvent): EventOwner | undefined {
  const merchantId = MerchantId.safeParse(e.payment.metadata?.[ownerMetadataKeys.merchantId]);
  const key = IdempotencyKey.safeParse(e.payment.metadata?.[ownerMetadataKeys.key]);
  return merchantId.success && key.success ? { merchantId: merchantId.data, key: key.data } : undefined;
}

/** Any JSON object: each provider's verifier parses its own event format after checking the signature. */
const ProviderWebhookBody = z
  .looseObject({})
  .describe(
    "The provider's own event, signed with its own scheme (simulator: Sim-Signature; stripe: Stripe-Signature).",
  );

// The body stays the raw string until its signature is verified; the schema documents it, the handler parses it.
const rawBodyValidator: FastifySchemaCompiler<unknown> = (route) =>
  route.httpPart === 'body'
    ? (data: unknown) => ({ value: data })
    : validatorCompiler(route as FastifyRouteSchemaDef<z.ZodType>);

/** `POST /webhooks/:provider`: verify, parse, hand to Temporal, and only then answer 2xx. */
export const webhookRoutes: FastifyPluginAsyncZod<WebhookRoutesOptions> = async (app, opts) => {
  // Scoped to this plugin: every content type arrives as the exact string that was signed.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'string' }, (_request, body, done) => done(null, body));

  app.post(
    '/webhooks/:provider',
    {
      config: { public: true },
      validatorCompiler: rawBodyValidator,
      schema: {
        operationId: 'receiveProviderWebhook',
        summary: "A provider event, verified with that provider's signature scheme",
        description:
          '2xx only after Temporal durably accepted the event (signalled to its payment, or parked for an operator); ' +
          '400 on a bad signature or a timestamp older than the tolerance, so nothing unverified is ever applied; ' +
          '`ignored` for a signed event of a type no payment acts on (simulator: Sim-Signature, HMAC-SHA256 of ' +
          '"t.rawBody"; stripe: Stripe-Signature).',
        tags: ['webhooks'],
        security: [],
        params: ProviderParams,
        body: ProviderWebhookBody,
        response: { 200: WebhookAck, 400: ApiError, 404: ApiError, 503: ApiError },
      },
    },
    async (request, reply) => {
      const { provider } = request.params;
      const verifier = Object.hasOwn(opts.verifiers, provider) ? opts.verifiers[provider] : undefined;
      if (verifier === undefined) return reply.code(404).send(errorBody('not_found', 'Unknown provider'));
      const m = opts.metrics;
      m?.webhooksReceived.inc({ provider });
      const raw: unknown = request.body;
      const verdict = verifier.verify(typeof raw === 'string' ? raw : '', request.headers);
      switch (verdict.kind) {
        case 'refused':
          request.log.warn({ provider, reason: verdict.reason }, 'webhook signature refused');
          m?.webhooksRefused.inc({ provider, reason: 'signature' });
          return reply.code(400).send(errorBody('invalid_signature', `Signature refused: ${verdict.reason}`));
        case 'invalid':
          m?.webhooksRefused.inc({ provider, reason: 'body' });
          return reply
            .code(400)
            .send(
              errorBody('validation_error', verdict.message, verdict.issues.length > 0 ? verdict.issues : undefined),
            );
        case 'ignored':
          // Signed by the provider but nothing a payment acts on: 2xx, or the provider resends it for days.
          request.log.info({ provider, eventType: verdict.eventType }, 'webhook ignored');
          return reply.code(200).send({ received: true as const, delivery: 'ignored' as const });
        case 'event': {
          const delivery = await opts.client.deliverProviderEvent(provider, verdict.event, ownerOf(verdict.event));
          if (delivery === 'duplicate') m?.webhooksDuplicate.inc({ provider });
          else m?.webhooksApplied.inc({ provider, delivery });
          request.log.info({ provider, eventType: verdict.eventType, delivery }, 'webhook accepted');
          return reply.code(200).send({ received: true as const, delivery });
        }
      }
    },
  );
};
