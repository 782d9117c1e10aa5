/**
 * The payments HTTP API (docs/http-api.md) over a {@link PaymentsClient}. zod schemas from `src/domain` validate every
 * request and response and generate `/openapi.json`.
 */
import { randomUUID } from 'node:crypto';
import swagger from '@fastify/swagger';
import Fastify, { type FastifyBaseLogger, type FastifyInstance, LogController } from 'fastify';
import {
  type ZodTypeProvider,
  createJsonSchemaTransform,
  createJsonSchemaTransformObject,
  serializerCompiler,
  validatorCompiler,
} from 'fastify-type-provider-zod';
import type { PayloadCodec } from '@temporalio/common';
import { z } from 'zod';
import type { PaymentsClient } from '../client';
import { ApiError, Health, PaymentList, ReviewItemList, ReviewItemView, WebhookAck } from '../domain/api-schemas';
import { PaymentView } from '../domain/payment';
import { type ApiMetrics, createApiMetrics, registerRequestMetrics } from '../metrics/api-metrics';
import {
  type CodecTokenEntry,
  type OperatorTokenEntry,
  type Principal,
  type Role,
  type TokenEntry,
  createTokenVerifier,
} from './auth';
import { answerInvalidPath, errorBody, handleError } from './errors';
import { registerRequestLog } from './request-log';
import { describeHeadersAndErrors } from './openapi';
import { codecRoutes } from './routes/codec';
import { paymentRoutes } from './routes/payments';
import { reviewItemRoutes } from './routes/review-items';
import { walletRoutes } from './routes/wallets';
import { type WebhookEndpointRoutesOptions, webhookEndpointRoutes } from './routes/webhook-endpoint';
import { webhookRoutes } from './routes/webhooks';
import type { WebhookVerifier } from '../domain/webhooks';
import { WalletEntryList, WalletView } from '../domain/wallets';
import { walletMetricsObserver } from '../metrics/wallet-metrics';
import type { WalletLedger } from '../wallets';

declare module 'fastify' {
  interface FastifyRequest {
    /** The merchant the bearer token maps to ('' on public routes and for an operator). */
    merchantId: string;
    /** The operator the bearer token maps to ('' on public routes and for a merchant). */
    operatorId: string;
  }
  interface FastifyContextConfig {
    /** No bearer token needed (health, OpenAPI, provider webhooks: those are signed instead). */
    public?: boolean;
    /**
     * The roles that may call the route; default merchants only. Any other valid token is 403 `forbidden` before the
     * body is even validated: an operator token never charges, captures, refunds or reads, a merchant token never
     * resolves a payment.
     */
    roles?: readonly Role[];
  }
}

/** What the API needs from the configuration. */
export interface ApiConfig {
  readonly API_TOKENS: readonly TokenEntry[];
  /** Operator tokens (config `OPERATOR_TOKENS`); none: no one can call the operator actions. */
  readonly OPERATOR_TOKENS?: readonly OperatorTokenEntry[];
  /** Decode-only tokens (config `CODEC_TOKENS`): `POST /codec/decode` and nothing else. */
  readonly CODEC_TOKENS?: readonly CodecTokenEntry[];
}

/** Dependencies of {@link buildApi}. */
export interface ApiDeps {
  readonly client: PaymentsClient;
  readonly config: ApiConfig;
  readonly logger: FastifyBaseLogger;
  /** Request and webhook metrics served at `GET /metrics`; default a registry of their own. */
  readonly metrics?: ApiMetrics;
  /**
   * The payload codec served at `/codec/encode|decode` (web UI, CLI); none: no codec routes. `corsOrigins`: browsers
   * that may read its answers; `trustedOrigins`: browsers that may decode without a token (development only).
   */
  readonly codec?: {
    readonly codec: PayloadCodec;
    readonly corsOrigins: readonly string[];
    readonly trustedOrigins?: readonly string[];
  };
  /**
   * The webhook verifier of each provider whose webhooks this API accepts (`POST /webhooks/:provider`; any other
   * provider is 404). Built from the configuration by src/stack.ts: the API never imports a provider.
   */
  readonly webhooks: Readonly<Record<string, WebhookVerifier>>;
  /**
   * The keyed hash log lines carry instead of idempotency keys (src/providers/logging.ts, keyed by `LOG_HASH_SECRET`),
   * handed in by src/stack.ts: the API never imports a provider module.
   */
  readonly keyHash: (key: string) => string;
  /** The wallet ledger (PostgreSQL) behind `/v1/wallets`; absent: those routes answer 404. */
  readonly wallets?: WalletLedger;
  /** The merchants' webhook endpoints (PostgreSQL) behind `/v1/webhook-endpoint`; absent: those routes answer 404. */
  readonly webhookEndpoints?: WebhookEndpointRoutesOptions;
}

/** Bodies above this are refused with 413 before they are read further. */
export const BODY_LIMIT_BYTES = 16 * 1024;

/**
 * The router's bound on one path segment, decoded. Its default (100) cut idempotency keys of 101-255 characters off
 * with its own 414; this is above anything an HTTP request line can carry (Node's 16 KiB header limit), so every
 * segment reaches its route's schema, which answers a key over 255 with our 400 naming it.
 */
export const MAX_PATH_SEGMENT_LENGTH = 16 * 1024;

/** Why a valid token of each role is refused on a route that does not admit it. */
const forbiddenMessage: Readonly<Record<Principal['role'], string>> = {
  merchant: 'This is an operator action: a merchant token may not do it',
  operator: 'An operator token only resolves reviews and uses the codec',
  codec: 'A codec token only decodes payloads',
};

/** Builds the Fastify app (not listening yet). */
export async function buildApi({ client, config, logger, ...deps }: ApiDeps): Promise<FastifyInstance> {
  const metrics = deps.metrics ?? createApiMetrics();
  const app = Fastify({
    loggerInstance: logger,
    bodyLimit: BODY_LIMIT_BYTES,
    genReqId: () => randomUUID(),
    requestIdHeader: false,
    // registerRequestLog writes one safe line per request instead of the default lines with raw URLs.
    logController: new LogController({ requestIdLogLabel: 'requestId', disableRequestLogging: true }),
    return503OnClosing: true,
    routerOptions: { maxParamLength: MAX_PATH_SEGMENT_LENGTH },
    // The router's own answers (a malformed or over-long path) echo the path: ours name the part, never its text.
    frameworkErrors: answerInvalidPath,
  }).withTypeProvider<ZodTypeProvider>();
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);
  app.setErrorHandler(handleError);
  app.setNotFoundHandler((_request, reply) => reply.code(404).send(errorBody('not_found', 'No such route')));

  // The component ids go into zod's global registry, where `.describe()` keeps its texts: a registry of our own would
  // carry the ids but drop every field description from the document. Registered once per process.
  const registry = z.globalRegistry;
  const components = {
    PaymentView,
    PaymentList,
    ReviewItemView,
    ReviewItemList,
    Error: ApiError,
    WebhookAck,
    WalletView,
    WalletEntryList,
  } as const;
  for (const [id, schema] of Object.entries(components)) {
    if (registry.get(schema)?.id !== id) registry.add(schema, { ...registry.get(schema), id });
  }
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'payment-workflows',
        version: '1.0.0',
        description:
          'Charge, capture, refund and reconcile payments as Temporal workflows. What each answer means: ' +
          'docs/http-api.md in the repository.',
      },
      components: { securitySchemes: { bearerAuth: { type: 'http', scheme: 'bearer' } } },
      security: [{ bearerAuth: [] }],
    },
    transform: createJsonSchemaTransform({ schemaRegistry: registry }),
    transformObject: (input) =>
      describeHeadersAndErrors(
        createJsonSchemaTransformObject({ schemaRegistry: registry })(input) as unknown as Record<string, unknown>,
      ) as unknown as ReturnType<ReturnType<typeof createJsonSchemaTransformObject>>,
  });

  const principalOf = createTokenVerifier(config.API_TOKENS, config.OPERATOR_TOKENS ?? [], config.CODEC_TOKENS ?? []);
  app.decorateRequest('merchantId', '');
  app.decorateRequest('operatorId', '');
  app.addHook('onRequest', async (request, reply) => {
    reply.header('request-id', request.id);
    const { config: route } = request.routeOptions;
    if (route.public) return;
    const principal = principalOf(request.headers.authorization);
    if (principal === undefined) {
      return reply.code(401).header('www-authenticate', 'Bearer').send(errorBody('unauthorized'));
    }
    if (!(route.roles ?? ['merchant']).includes(principal.role)) {
      return reply.code(403).send(errorBody('forbidden', forbiddenMessage[principal.role]));
    }
    if (principal.role === 'merchant') request.merchantId = principal.merchantId;
    else if (principal.role === 'operator') request.operatorId = principal.operatorId;
  });
  registerRequestLog(app, deps.keyHash);
  registerRequestMetrics(app, metrics);

  app.get(
    '/healthz',
    {
      config: { public: true },
      schema: {
        operationId: 'health',
        summary: 'Liveness',
        tags: ['operations'],
        security: [],
        response: { 200: Health },
      },
    },
    async () => ({ status: 'ok' as const }),
  );
  app.get(
    '/openapi.json',
    {
      config: { public: true },
      schema: {
        operationId: 'openapi',
        summary: 'This OpenAPI document',
        tags: ['operations'],
        security: [],
        response: { 200: z.looseObject({ openapi: z.string() }) },
      },
    },
    async () => app.swagger() as unknown as { openapi: string },
  );
  app.get(
    '/metrics',
    {
      // Scraped by Prometheus without a token: counts by route pattern and status, never keys, merchants or bodies.
      config: { public: true },
      schema: {
        operationId: 'metrics',
        summary: 'Prometheus metrics (text format)',
        tags: ['operations'],
        security: [],
      },
    },
    async (_request, reply) =>
      reply.header('content-type', metrics.registry.contentType).send(await metrics.registry.metrics()),
  );
  if (deps.codec) {
    await app.register(codecRoutes, {
      codec: deps.codec.codec,
      corsOrigins: deps.codec.corsOrigins,
      trustedOrigins: deps.codec.trustedOrigins ?? [],
      principalOf,
    });
  }
  await app.register(paymentRoutes, { client });
  await app.register(reviewItemRoutes, { client });
  await app.register(webhookRoutes, { client, verifiers: deps.webhooks, metrics });
  await app.register(walletRoutes, { wallets: deps.wallets?.withObserver(walletMetricsObserver(metrics.registry)) });
  await app.register(webhookEndpointRoutes, deps.webhookEndpoints ?? { endpoints: undefined, allowPrivateUrls: false });
  return app;
}
