/**
 * `BENCH_MERCHANT_WEBHOOKS=1`: the bench with webhooks to the merchant on. A PostgreSQL of the bench's own (durable, as
 * production runs it), each scenario's merchant with an endpoint on a local receiver that answers 204 at once, payments
 * that announce their events, and the delivery side's cost per payment read from the merchant's delivery workflow.
 */
import { mkdtempSync } from 'node:fs';
import { type Server, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import type { Client } from '@temporalio/client';
import pino from 'pino';
import { startPostgresServer } from '../scripts/lib/postgres-server';
import { openDatabase } from '../src/db';
import { merchantWebhooksWorkflowId } from '../src/domain/merchant-events';
import { MerchantEventOutbox, WebhookEndpoints } from '../src/merchant-webhooks';
import { analyzeHistory } from './history';

/** The bench's merchant webhook side. */
export interface BenchMerchantWebhooks {
  readonly outbox: MerchantEventOutbox;
  readonly endpoints: WebhookEndpoints;
  /** The receiver every scenario's merchant points its endpoint at. */
  readonly receiverUrl: string;
  /** The merchant's events: all of them, and those delivered. */
  counts(merchantId: string): Promise<{ readonly events: number; readonly delivered: number }>;
  close(): Promise<void>;
}

/** What delivering a scenario's events cost, per payment of the scenario (warm-up included). */
export interface DeliveryCost {
  /** Events the scenario's payments queued, and how many were delivered. */
  readonly events: number;
  readonly delivered: number;
  /** History events of the merchant's delivery workflow (every run) per payment. */
  readonly historyEventsPerPayment: number;
  /** Its estimated actions per payment (bench/history.ts's rules: start, activity attempts, signals, timers). */
  readonly actionsPerPayment: number;
}

/** Starts the webhook side when BENCH_MERCHANT_WEBHOOKS=1; undefined otherwise. */
export async function startBenchMerchantWebhooks(
  log: (line: string) => void,
): Promise<BenchMerchantWebhooks | undefined> {
  if (process.env.BENCH_MERCHANT_WEBHOOKS !== '1') return undefined;
  const server = await startPostgresServer({ dir: mkdtempSync(path.join(os.tmpdir(), 'pw-bench-postgres-')) });
  const url = await server.createDatabase('bench');
  const db = await openDatabase({ url, poolSize: 20 }, pino({ level: 'silent' }));
  const receiver: Server = createServer((req, res) => {
    req.resume();
    req.on('end', () => res.writeHead(204).end());
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  const { port } = receiver.address() as AddressInfo;
  log(`merchant webhooks on: PostgreSQL ${server.version} at ${server.host}:${server.port}, receiver on ${port}`);
  return {
    outbox: new MerchantEventOutbox(db.pool),
    endpoints: new WebhookEndpoints(db.pool),
    receiverUrl: `http://127.0.0.1:${port}/hooks`,
    async counts(merchantId) {
      const { rows } = await db.pool.query<{ events: number; delivered: number }>(
        `SELECT count(*)::int AS events, (count(*) FILTER (WHERE status = 'delivered'))::int AS delivered
         FROM merchant_webhook_events WHERE merchant_id = $1`,
        [merchantId],
      );
      return { events: rows[0]?.events ?? 0, delivered: rows[0]?.delivered ?? 0 };
    },
    async close() {
      receiver.closeAllConnections();
      await new Promise<void>((resolve) => receiver.close(() => resolve()));
      await db.close();
      await server.close(true);
    },
  };
}

/**
 * Waits (bounded) until the scenario merchant's events are delivered, then reads every run of its delivery workflow:
 * the delivery side's events and actions per payment.
 */
export async function deliveryCost(
  client: Client,
  hooks: BenchMerchantWebhooks,
  merchantId: string,
  payments: number,
): Promise<DeliveryCost> {
  const deadline = Date.now() + 30_000;
  let counts = await hooks.counts(merchantId);
  while (counts.delivered < counts.events && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 200));
    counts = await hooks.counts(merchantId);
  }
  let runId: string | undefined;
  let historyEvents = 0;
  let actions = 0;
  for (;;) {
    const history = await client.workflow.getHandle(merchantWebhooksWorkflowId(merchantId), runId).fetchHistory();
    const stats = analyzeHistory(history.events ?? []);
    historyEvents += stats.events;
    actions += stats.actions;
    runId = history.events?.[0]?.workflowExecutionStartedEventAttributes?.continuedExecutionRunId ?? undefined;
    if (!runId) break;
  }
  const r2 = (x: number) => Math.round((x / Math.max(1, payments)) * 100) / 100;
  return {
    ...counts,
    historyEventsPerPayment: r2(historyEvents),
    actionsPerPayment: r2(actions),
  };
}
