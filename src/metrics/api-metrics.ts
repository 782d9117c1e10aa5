/**
 * The API's metrics (prom-client): requests by method, route pattern and status with a latency histogram, and the
 * provider webhooks: received, refused (bad signature or body), applied (handed to a payment, or parked for an
 * operator) and duplicate (a closed payment already shows it). Served at `GET /metrics`.
 */
import type { FastifyInstance } from 'fastify';
import { Counter, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/** The metric objects, registered on one registry. */
export interface ApiMetrics {
  readonly registry: Registry;
  readonly requests: Counter<'method' | 'route' | 'status'>;
  readonly requestSeconds: Histogram<'method' | 'route' | 'status'>;
  readonly webhooksReceived: Counter<'provider'>;
  readonly webhooksRefused: Counter<'provider' | 'reason'>;
  readonly webhooksApplied: Counter<'provider' | 'delivery'>;
  readonly webhooksDuplicate: Counter<'provider'>;
}

/** Registers the API's metrics on `registry` (default: a new one with the process metrics). */
export function createApiMetrics(registry?: Registry): ApiMetrics {
  const own = registry ?? new Registry();
  if (!registry) collectDefaultMetrics({ register: own });
  const registers = [own];
  return {
    registry: own,
    requests: new Counter({
      name: 'payments_api_requests_total',
      help: 'API requests by method, route pattern (never the raw URL) and status code',
      labelNames: ['method', 'route', 'status'],
      registers,
    }),
    requestSeconds: new Histogram({
      name: 'payments_api_request_duration_seconds',
      help: 'API request latency by method, route pattern and status code',
      labelNames: ['method', 'route', 'status'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers,
    }),
    webhooksReceived: new Counter({
      name: 'payments_webhooks_received_total',
      help: 'Provider webhook deliveries received (before verification)',
      labelNames: ['provider'],
      registers,
    }),
    webhooksRefused: new Counter({
      name: 'payments_webhooks_refused_total',
      help: 'Provider webhooks refused with 400: bad or stale signature, invalid body',
      labelNames: ['provider', 'reason'],
      registers,
    }),
    webhooksApplied: new Counter({
      name: 'payments_webhooks_applied_total',
      help: 'Provider webhooks durably handed on: to the payment (delivery="payment") or parked for an operator',
      labelNames: ['provider', 'delivery'],
      registers,
    }),
    webhooksDuplicate: new Counter({
      name: 'payments_webhooks_duplicate_total',
      help: 'Provider webhooks whose event a closed payment already reflects (a redelivery)',
      labelNames: ['provider'],
      registers,
    }),
  };
}

/** Counts every answered request (route pattern, never the raw URL, which carries keys and order ids). */
export function registerRequestMetrics(app: FastifyInstance, metrics: ApiMetrics): void {
  app.addHook('onResponse', async (request, reply) => {
    const labels = {
      method: request.method,
      route: request.routeOptions.url ?? '(no route)',
      status: String(reply.statusCode),
    };
    metrics.requests.inc(labels);
    metrics.requestSeconds.observe(labels, reply.elapsedTime / 1000);
  });
}
