/**
 * The codec server: `POST /codec/encode` and `POST /codec/decode` in the format the Temporal web UI and CLI speak
 * (`{ payloads: [{ metadata: { name: base64 }, data: base64 }] }`), for operators only.
 *
 * Two ways to present the operator token: `Authorization: Bearer <token>` (the CLI's `--codec-auth`, scripts), or in
 * the path, `/codec/operator/<token>/decode`, for the web UI, which sends no Authorization header to a codec endpoint
 * unless it runs behind its own OAuth and over https (then it sends the UI user's token, which is not ours). CORS
 * answers only the configured UI origins.
 */
import type { Payload, PayloadCodec } from '@temporalio/common';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { ApiError } from '../../domain/api-schemas';
import { errorBody } from '../errors';

/** Options of {@link codecRoutes}. */
export interface CodecRoutesOptions {
  readonly codec: PayloadCodec;
  /** Origins (scheme://host:port) whose browsers may call the codec endpoints: the web UI's. */
  readonly corsOrigins: readonly string[];
  /** Whether `token` is a valid operator token. */
  readonly isOperatorToken: (token: string) => boolean;
}

/** A codec request is a batch of payloads; the app's 16 KiB limit is for payment requests, not histories. */
export const CODEC_BODY_LIMIT_BYTES = 8 * 1024 * 1024;

const base64 = z.string().regex(/^[A-Za-z0-9+/]*={0,2}$/, { message: 'must be base64' });

/** One payload in proto3 JSON: byte fields base64. */
export const JsonPayload = z.object({
  metadata: z.record(z.string(), base64).optional(),
  data: base64.optional(),
});

/** A codec request or answer. */
export const JsonPayloads = z
  .object({ payloads: z.array(JsonPayload).max(10_000) })
  .describe('Payloads in proto3 JSON (bytes as base64), as the Temporal web UI and CLI send them');

const fromJson = (p: z.infer<typeof JsonPayload>): Payload => ({
  metadata: Object.fromEntries(Object.entries(p.metadata ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64')])),
  data: Buffer.from(p.data ?? '', 'base64'),
});

const toJson = (p: Payload): z.infer<typeof JsonPayload> => ({
  metadata: Object.fromEntries(
    Object.entries(p.metadata ?? {}).flatMap(([k, v]) => (v == null ? [] : [[k, Buffer.from(v).toString('base64')]])),
  ),
  data: Buffer.from(p.data ?? new Uint8Array()).toString('base64'),
});

export const codecRoutes: FastifyPluginAsyncZod<CodecRoutesOptions> = async (app, opts) => {
  const origins = new Set(opts.corsOrigins);
  // On every answer of these routes, the 401/403 of the auth hook included: a browser must be able to read them.
  app.addHook('onSend', async (request, reply, payload) => {
    const origin = request.headers.origin;
    if (typeof origin === 'string' && origins.has(origin)) {
      reply.header('access-control-allow-origin', origin);
      reply.header('vary', 'Origin');
      reply.header('access-control-allow-methods', 'POST, OPTIONS');
      reply.header('access-control-allow-headers', 'authorization, content-type, x-namespace');
      reply.header('access-control-max-age', '600');
    }
    return payload;
  });

  const preflight = {
    config: { public: true },
    schema: { hide: true },
  } as const;
  app.options('/codec/:action', preflight, async (_request, reply) => reply.code(204).send());
  app.options('/codec/operator/:token/:action', preflight, async (_request, reply) => reply.code(204).send());

  for (const action of ['encode', 'decode'] as const) {
    const run = async (body: z.infer<typeof JsonPayloads>) => {
      const payloads = body.payloads.map(fromJson);
      const out = action === 'encode' ? await opts.codec.encode(payloads) : await opts.codec.decode(payloads);
      return { payloads: out.map(toJson) };
    };
    const schema = {
      operationId: `codec${action === 'encode' ? 'Encode' : 'Decode'}`,
      summary:
        action === 'encode'
          ? 'Encrypt payloads with the current key (codec server for the web UI and CLI)'
          : 'Decrypt payloads (any configured key); payloads that are not encrypted come back unchanged',
      tags: ['operations'],
      body: JsonPayloads,
      response: { 200: JsonPayloads, 400: ApiError, 401: ApiError, 403: ApiError },
    };
    app.post(
      `/codec/${action}`,
      { bodyLimit: CODEC_BODY_LIMIT_BYTES, config: { roles: ['operator'] }, schema },
      async (request) => run(request.body),
    );
    app.post(
      `/codec/operator/:token/${action}`,
      {
        bodyLimit: CODEC_BODY_LIMIT_BYTES,
        // The token is in the path, checked here: the bearer-token hook does not apply.
        config: { public: true },
        schema: {
          ...schema,
          operationId: `${schema.operationId}WithPathToken`,
          description:
            'For the Temporal web UI (it cannot send our bearer token): the operator token is the path segment. ' +
            'Configure the UI with codec endpoint `<api>/codec/operator/<token>`.',
          security: [],
          params: z.object({ token: z.string().min(1).max(256) }),
        },
      },
      async (request, reply) => {
        if (!opts.isOperatorToken(request.params.token)) return reply.code(401).send(errorBody('unauthorized'));
        return run(request.body);
      },
    );
  }
};
