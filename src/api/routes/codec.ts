/**
 * The codec server: `POST /codec/encode` and `POST /codec/decode` in the format the Temporal web UI and CLI speak
 * (`{ payloads: [{ metadata: { name: base64 }, data: base64 }] }`).
 *
 * Who may call (docs/operations.md, "Encrypted payloads and the codec endpoint"): decode takes an operator token or a
 * decode-only codec token (`CODEC_TOKENS`: the auth proxy in front of a production web UI, scripts) as
 * `Authorization: Bearer`, or, where `CODEC_TRUSTED_ORIGINS` names it (development: `npm start`'s web UI, which sends
 * no credential of ours), a browser request from that origin without any token. Encode takes operator tokens only.
 * No credential ever travels in a URL. CORS answers only the configured UI origins.
 */
import type { Payload, PayloadCodec } from '@temporalio/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { ApiError } from '../../domain/api-schemas';
import type { Principal } from '../auth';
import { errorBody } from '../errors';

/** Options of {@link codecRoutes}. */
export interface CodecRoutesOptions {
  readonly codec: PayloadCodec;
  /** Origins (scheme://host:port) whose browsers may read the codec's answers: the web UI's. */
  readonly corsOrigins: readonly string[];
  /** Origins whose browser requests may decode without a token (config `CODEC_TRUSTED_ORIGINS`, development only). */
  readonly trustedOrigins: readonly string[];
  /** Who an `Authorization` header speaks for. */
  readonly principalOf: (authorization: string | undefined) => Principal | undefined;
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

/**
 * Decodes payload by payload: one the codec cannot open (a key no longer in `PAYLOAD_KEYS`, a tampered one) comes back
 * as it came, so the UI still shows every other payload of the history; how many were left is logged, never a key.
 */
async function decodeEach(codec: PayloadCodec, payloads: Payload[], request: FastifyRequest): Promise<Payload[]> {
  let left = 0;
  const out = await Promise.all(
    payloads.map(async (p) => {
      try {
        return (await codec.decode([p]))[0] ?? p;
      } catch {
        left += 1;
        return p;
      }
    }),
  );
  if (left > 0) request.log.warn({ undecodable: left, payloads: payloads.length }, 'codec: payloads left encoded');
  return out;
}

export const codecRoutes: FastifyPluginAsyncZod<CodecRoutesOptions> = async (app, opts) => {
  const origins = new Set(opts.corsOrigins);
  const trusted = new Set(opts.trustedOrigins);
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

  /** Decode: an operator or codec token; without any token, a browser on a trusted origin. 401/403 otherwise. */
  const mayDecode = async (request: FastifyRequest, reply: FastifyReply) => {
    const { authorization, origin } = request.headers;
    if (authorization === undefined) {
      if (typeof origin === 'string' && trusted.has(origin)) return;
      return reply.code(401).header('www-authenticate', 'Bearer').send(errorBody('unauthorized'));
    }
    const principal = opts.principalOf(authorization);
    if (principal === undefined) {
      return reply.code(401).header('www-authenticate', 'Bearer').send(errorBody('unauthorized'));
    }
    if (principal.role === 'merchant') {
      return reply.code(403).send(errorBody('forbidden', 'A merchant token may not decode payloads'));
    }
  };

  app.options('/codec/:action', { config: { public: true }, schema: { hide: true } }, async (_request, reply) =>
    reply.code(204).send(),
  );

  const schema = (action: 'encode' | 'decode') => ({
    operationId: action === 'encode' ? 'codecEncode' : 'codecDecode',
    summary:
      action === 'encode'
        ? 'Encrypt payloads with the current key (operator tokens only)'
        : 'Decrypt payloads (any configured key), payload by payload: one that is not ours or whose key is not ' +
          'configured comes back unchanged',
    description:
      action === 'encode'
        ? 'For the Temporal CLI (`--codec-endpoint`, `--codec-auth`).'
        : 'For the Temporal web UI and CLI: an operator token or a decode-only codec token (`CODEC_TOKENS`) as ' +
          'Authorization; without a token only a browser on one of `CODEC_TRUSTED_ORIGINS` (development).',
    tags: ['operations'],
    body: JsonPayloads,
    response: { 200: JsonPayloads, 400: ApiError, 401: ApiError, 403: ApiError },
  });
  app.post(
    '/codec/encode',
    { bodyLimit: CODEC_BODY_LIMIT_BYTES, config: { roles: ['operator'] }, schema: schema('encode') },
    async (request) => ({ payloads: (await opts.codec.encode(request.body.payloads.map(fromJson))).map(toJson) }),
  );
  app.post(
    '/codec/decode',
    {
      bodyLimit: CODEC_BODY_LIMIT_BYTES,
      // Checked by `mayDecode`: a trusted browser origin may decode without the bearer token the global hook wants.
      config: { public: true },
      onRequest: mayDecode,
      schema: { ...schema('decode'), security: [{ bearerAuth: [] }, {}] },
    },
    async (request) => ({
      payloads: (await decodeEach(opts.codec, request.body.payloads.map(fromJson), request)).map(toJson),
    }),
  );
};
