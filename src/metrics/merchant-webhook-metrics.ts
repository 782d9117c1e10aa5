/**
 * The merchant webhooks' metrics (prom-client), on the worker's registry: every POST by outcome, events by how they
 * ended, the delivery lag from the payment's announcement to the endpoint's 2xx, and, read from PostgreSQL on each
 * scrape, each merchant's backlog and the age of its oldest pending event (docs/operations.md#webhooks-to-merchants).
 */
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { MerchantBacklog, MerchantWebhookObserver } from '../merchant-webhooks';

/** Registers the metrics on `registry` and answers the observer that counts into them; `backlog` feeds the gauges. */
export function merchantWebhookMetrics(
  registry: Registry,
  backlog?: () => Promise<readonly MerchantBacklog[]>,
): MerchantWebhookObserver {
  const registers = [registry];
  const attempts = new Counter({
    name: 'payments_merchant_webhook_attempts_total',
    help: 'POSTs to merchant endpoints by outcome: delivered (2xx), http_3xx, http_4xx, http_5xx, timeout, unreachable',
    labelNames: ['outcome'],
    registers,
  });
  const events = new Counter({
    name: 'payments_merchant_webhook_events_total',
    help:
      'Merchant webhook events by what became of them: queued (handed over by a payment), no_endpoint (its merchant ' +
      'has none: not queued), delivered, gave_up (retried for the whole window), discarded (endpoint removed)',
    labelNames: ['outcome'],
    registers,
  });
  const lag = new Histogram({
    name: 'payments_merchant_webhook_delivery_lag_seconds',
    help: 'From the payment announcing an event to its merchant endpoint answering 2xx (retries included)',
    buckets: [0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1_800, 3_600, 21_600, 86_400, 259_200],
    registers,
  });
  if (backlog) {
    // One query serves both gauges of a scrape; a database that does not answer leaves them without series (absent,
    // not 0) and the rest of the scrape intact.
    let last: { readonly at: number; readonly rows: Promise<readonly MerchantBacklog[]> } | undefined;
    const read = () => {
      if (last === undefined || Date.now() - last.at > 1_000) {
        last = { at: Date.now(), rows: backlog().catch(() => []) };
      }
      return last.rows;
    };
    new Gauge({
      name: 'payments_merchant_webhook_backlog_events',
      help: 'Events waiting for delivery, per merchant with any (from the database at scrape time)',
      labelNames: ['merchant'],
      registers,
      async collect() {
        this.reset();
        for (const r of await read()) this.set({ merchant: r.merchantId }, r.pending);
      },
    });
    new Gauge({
      name: 'payments_merchant_webhook_oldest_pending_seconds',
      help: 'Age of the oldest event waiting for delivery, per merchant with any (from the database at scrape time)',
      labelNames: ['merchant'],
      registers,
      async collect() {
        this.reset();
        for (const r of await read()) this.set({ merchant: r.merchantId }, r.oldestPendingS);
      },
    });
  }
  return {
    onAnnounced: (outcome) => events.inc({ outcome }),
    onAttempt: (outcome) => attempts.inc({ outcome }),
    onDelivered: (lagMs) => {
      events.inc({ outcome: 'delivered' });
      lag.observe(Math.max(0, lagMs) / 1000);
    },
    onAbandoned: (outcome, count) => events.inc({ outcome }, count),
  };
}
