import type { FastifyInstance } from 'fastify';

/**
 * One line per request with the route pattern (never the raw URL: it carries keys and order ids), the status, the
 * duration, the merchant and keyed hashes (`keyHash`, the workers' own) of the keys involved. Headers and bodies
 * (tokens, payment methods) never appear.
 */
export function registerRequestLog(app: FastifyInstance, keyHash: (key: string) => string): void {
  app.addHook('onResponse', async (request, reply) => {
    const params = request.params as { key?: unknown } | undefined;
    const headerKey = request.headers['idempotency-key'];
    request.log.info(
      {
        method: request.method,
        route: request.routeOptions.url ?? '(no route)',
        status: reply.statusCode,
        ms: Math.round(reply.elapsedTime),
        ...(request.merchantId ? { merchantId: request.merchantId } : {}),
        ...(typeof params?.key === 'string' ? { paymentKeyHash: keyHash(params.key) } : {}),
        ...(typeof headerKey === 'string' ? { idempotencyKeyHash: keyHash(headerKey) } : {}),
      },
      'request',
    );
  });
}
