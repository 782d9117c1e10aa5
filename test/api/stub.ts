/** An API over a stub PaymentsClient: for tests of HTTP behaviour that never reach Temporal. */
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import pino from 'pino';
import { buildApi } from '../../src/api/app';
import { AesGcmPayloadCodec, newPayloadKey, parsePayloadKeys } from '../../src/codec';
import type { PaymentsClient } from '../../src/client';
import { webhookVerifiers } from '../../src/providers';
import { keyHash } from '../../src/providers/logging';

export const STUB_TOKEN = 'tok_stub_merchant_0123456789';
export const STUB_SECRET = 'whsec_stub_secret';
export const STUB_STRIPE_SECRET = 'whsec_stub_stripe_endpoint_secret';
export const STUB_OPERATOR = { operatorId: 'ops_stub', token: 'tok_stub_operator_0123456789' } as const;

/** A PaymentsClient whose every method is the given implementation or throws "not stubbed". */
export function stubClient(
  methods: Partial<Record<keyof PaymentsClient, (...args: never[]) => unknown>>,
): PaymentsClient {
  return new Proxy({} as PaymentsClient, {
    get: (_target, name: string) =>
      (methods as Record<string, unknown>)[name] ??
      (() => {
        throw new Error(`not stubbed: ${name}`);
      }),
  });
}

/** Starts the API over `client` on a free port. */
export async function startStubApi(client: PaymentsClient): Promise<{ app: FastifyInstance; url: string }> {
  const app = await buildApi({
    client,
    config: {
      API_TOKENS: [{ merchantId: 'm_stub', token: STUB_TOKEN }],
      OPERATOR_TOKENS: [STUB_OPERATOR],
    },
    webhooks: webhookVerifiers({
      WEBHOOK_SECRET: STUB_SECRET,
      WEBHOOK_TOLERANCE_S: 300,
      STRIPE_WEBHOOK_SECRET: STUB_STRIPE_SECRET,
    }),
    logger: pino({ level: 'silent' }),
    keyHash,
    codec: { codec: new AesGcmPayloadCodec(parsePayloadKeys(newPayloadKey('stub'))), corsOrigins: [] },
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  return { app, url: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}` };
}
