import type { FastifySchemaCompiler } from 'fastify';
import type { FastifyRouteSchemaDef } from 'fastify/types/schema';
import { type FastifyPluginAsyncZod, validatorCompiler } from 'fastify-type-provider-zod';
import type { z } from 'zod';
import type { EventOwner, PaymentsClient } from '../../client';
import { ApiError, ProviderParams, SimulatorWebhookEvent, WebhookAck } from '../../domain/api-schemas';
import type { ProviderEvent } from '../../domain/definitions';
import { IdempotencyKey, MerchantId } from '../../domain/payment';
import { errorBody } from '../errors';
import { verifySignature } from '../webhook-signature';

/** Options of {@link webhookRoutes}. */
export interface WebhookRoutesOptions {
  readonly client: PaymentsClient;
  /** `WEBHOOK_SECRET`: the HMAC key the provider signs with. */
  readonly secret: string;
  /** `WEBHOOK_TOLERANCE_S`: older (or further in the future) signatures are refused. */
  readonly toleranceS: number;
}

/** The providers whose webhooks this API verifies. */
const verifiedProviders = new Set(['simulator']);

/** The simulator's snake_case event in our camelCase {@link ProviderEvent}. */
export function toProviderEvent(e: SimulatorWebhookEvent): ProviderEvent {
  const p = e.data.payment;
  const named = Object.entries(p.metadata ?? {}).flatMap(([k, v]) => (v === undefined ? [] : [[k, v] as const]));
  const metadata = named.length === 0 ? undefined : Object.fromEntries(named);
  return {
    eventId: e.id,
    type: e.type,
    created: e.created,
    payment: {
      id: p.id,
      status: p.status,
      amount: p.amount,
      amountCaptured: p.amount_captured,
      amountRefunded: p.amount_refunded,
      currency: p.currency,
      reference: p.reference,
      created: p.created,
      // Kept, so routing and the payment can refuse an event whose metadata names another merchant or key.
      ...(metadata === undefined ? {} : { metadata }),
    },
  };
}

/** Our payment named by the event's metadata, when it names one validly. */
export function ownerOf(e: SimulatorWebhookEvent): EventOwner | undefined {
  const merchantId = MerchantId.safeParse(e.data.payment.metadata?.merchant_id);
  const key = IdempotencyKey.safeParse(e.data.payment.metadata?.payment_key);
  return merchantId.success && key.success ? { merchantId: merchantId.data, key: key.data } : undefined;
}

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
        summary: 'A provider event, signed with Sim-Signature (HMAC-SHA256 of "t.rawBody")',
        description:
          '2xx only after Temporal durably accepted the event (signalled to its payment, or parked for an operator); ' +
          '400 on a bad signature or a timestamp older than the tolerance, so nothing unverified is ever applied.',
        tags: ['webhooks'],
        security: [],
        params: ProviderParams,
        body: SimulatorWebhookEvent,
        response: { 200: WebhookAck, 400: ApiError, 404: ApiError, 503: ApiError },
      },
    },
    async (request, reply) => {
      const { provider } = request.params;
      if (!verifiedProviders.has(provider)) return reply.code(404).send(errorBody('not_found', 'Unknown provider'));
      const raw: unknown = request.body;
      const rawBody = typeof raw === 'string' ? raw : '';
      const signature = request.headers['sim-signature'];
      const check = verifySignature(
        opts.secret,
        typeof signature === 'string' ? signature : undefined,
        rawBody,
        opts.toleranceS,
      );
      if (!check.ok) {
        request.log.warn({ provider, reason: check.reason }, 'webhook signature refused');
        return reply.code(400).send(errorBody('invalid_signature', `Signature refused: ${check.reason}`));
      }
      let json: unknown;
      try {
        json = JSON.parse(rawBody);
      } catch {
        return reply.code(400).send(errorBody('validation_error', 'The body is not valid JSON'));
      }
      const parsed = SimulatorWebhookEvent.safeParse(json);
      if (!parsed.success) {
        const fields = parsed.error.issues.map((i) => ({ path: i.path.join('.') || '(body)', message: i.message }));
        return reply.code(400).send(errorBody('validation_error', 'The event is invalid', fields));
      }
      const delivery = await opts.client.deliverProviderEvent(
        provider,
        toProviderEvent(parsed.data),
        ownerOf(parsed.data),
      );
      request.log.info({ provider, eventType: parsed.data.type, delivery }, 'webhook accepted');
      return reply.code(200).send({ received: true as const, delivery });
    },
  );
};
