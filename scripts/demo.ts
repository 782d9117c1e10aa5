/**
 * `npm run demo`: walks payments through every path against a running `npm start` stack (API on PORT, simulator on
 * SIMULATOR_PORT, both on 127.0.0.1) and prints each result with web UI links filtered by status. It reads the same
 * environment as the stack (development defaults for the token and secrets). Every wait is bounded; it exits by itself.
 *
 * The needs_review path needs short reconcile timings; with the defaults (a 7-hour schedule) it is skipped with a hint.
 */
import { randomUUID } from 'node:crypto';
import { type Config, loadConfig } from '../src/config';
import type { PaymentStatus, PaymentView } from '../src/domain/payment';
import { retrySpecFor } from '../src/domain/retry';
import { reconcileWindowMs } from '../src/domain/workflow-inputs';
import { type DemoReceiver, startDemoReceiver } from './lib/demo-receiver';

const HOST = '127.0.0.1';
const UI = `http://${HOST}:${process.env.TEMPORAL_UI_PORT ?? 8233}`;
/** The longest the needs_review path may take for the demo to run it. */
const REVIEW_PATH_LIMIT_MS = 120_000;

interface Answer {
  readonly status: number;
  readonly headers: Headers;
  readonly body: Record<string, unknown>;
}

const config: Config = loadConfig();
const api = `http://${HOST}:${config.PORT}`;
const sim = config.SIMULATOR_URL;
const token = config.API_TOKENS[0]?.token ?? '';
const merchantId = config.API_TOKENS[0]?.merchantId ?? '';
// Resolving a review is an operator's action: the operator token names the merchant in the query.
const operatorToken = config.OPERATOR_TOKENS[0]?.token ?? '';
const run = randomUUID().slice(0, 8);
let n = 0;

async function call(
  method: string,
  url: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<Answer> {
  const res = await fetch(url, {
    method,
    headers: { ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(30_000),
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text ? (JSON.parse(text) as Record<string, unknown>) : {} };
}

const apiCall = (method: string, path: string, body?: unknown, key?: string) =>
  call(method, `${api}${path}`, body, { authorization: `Bearer ${token}`, ...(key ? { 'idempotency-key': key } : {}) });

const newOrder = () => `demo_${run}_${++n}`;
const newKey = () => `demo-${run}-${randomUUID()}`;

function show(title: string, answer: Answer): void {
  const v = answer.body as Partial<PaymentView> & { error?: { type: string } };
  const replayed = answer.headers.get('idempotent-replayed') ? ' (Idempotent-Replayed)' : '';
  const summary = v.error
    ? `error ${v.error.type}`
    : `${v.status} authorized=${v.amountAuthorized} captured=${v.amountCaptured} refunded=${v.amountRefunded}` +
      `${v.declineCode ? ` decline=${v.declineCode}` : ''}${v.review ? ` review="${v.review.reason}"` : ''}`;
  console.log(`  ${title.padEnd(44)} HTTP ${answer.status}${replayed}  ${summary}`);
}

/** Polls the payment until `done` or the deadline; answers the last view. */
async function waitFor(key: string, done: (v: PaymentView) => boolean, timeoutMs: number): Promise<Answer> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const answer = await apiCall('GET', `/v1/payments/${encodeURIComponent(key)}`);
    if (answer.status === 200 && done(answer.body as unknown as PaymentView)) return answer;
    if (Date.now() > deadline) return answer;
    await new Promise((r) => setTimeout(r, 500));
  }
}

const settled = (v: PaymentView) => !['pending', 'unknown'].includes(v.status);

async function charge(title: string, over: Record<string, unknown> = {}, fault?: Record<string, unknown>) {
  const orderId = newOrder();
  if (fault)
    await call('POST', `${sim}/_sim/faults`, {
      rules: [{ match: { operation: 'create', reference: orderId }, ...fault }],
    });
  const key = newKey();
  const body = { orderId, amount: { value: 1_000, currency: 'EUR' }, paymentMethod: 'pm_card_visa', ...over };
  const first = await apiCall('POST', '/v1/payments', body, key);
  const final = first.status === 202 ? await waitFor(key, settled, 60_000) : first;
  show(title, final);
  return { key, body, orderId };
}

async function main(): Promise<void> {
  const health = await call('GET', `${api}/healthz`).catch(() => undefined);
  if (health?.status !== 200) {
    console.error(`No API on ${api}: start the stack first (npm start), with the same environment as this demo.`);
    process.exit(1);
  }
  // The simulator announces every effect to the API, signed with the webhook secret.
  await call('PUT', `${sim}/_sim/merchants/${encodeURIComponent(config.PROVIDER_API_KEY)}`, {
    idempotency: config.PROVIDER_IDEMPOTENCY,
    key_ttl_s: config.PROVIDER_KEY_TTL_S,
    webhook_url: `${api}/webhooks/simulator`,
    webhook_secret: config.WEBHOOK_SECRET,
  });
  console.log(`payment-workflows demo (run ${run}) against ${api}\n`);
  const receiver = await receiveWebhooks();

  const ok = await charge('success');
  show('the same request again', await apiCall('POST', '/v1/payments', ok.body, ok.key));
  show(
    'same key, other amount',
    await apiCall('POST', '/v1/payments', { ...ok.body, amount: { value: 5, currency: 'EUR' } }, ok.key),
  );
  await charge('success (USD)', { amount: { value: 2_500, currency: 'USD' } });
  await charge('decline (pm_decline_insufficient_funds)', { paymentMethod: 'pm_decline_insufficient_funds' });
  await charge('503 once, then success', {}, { fault: 'status', status: 503, times: 1 });
  const lost = await charge('lost response (commit_then_drop), recovered', {}, { fault: 'commit_then_drop', times: 1 });
  const ledger = (await call('GET', `${sim}/_sim/ledger`)).body as {
    effects: { operation: string; reference: string }[];
  };
  const effects = ledger.effects.filter((e) => e.operation === 'create' && e.reference === lost.orderId).length;
  console.log(`  ${''.padEnd(44)} provider effects for that order: ${effects} (never a second charge)`);

  const manual = await charge('manual capture: authorize', { capture: 'manual' });
  const path = `/v1/payments/${encodeURIComponent(manual.key)}`;
  show('capture 600 of 1000', await apiCall('POST', `${path}/capture`, { amount: 600 }, newKey()));
  show('refund 200', await apiCall('POST', `${path}/refunds`, { amount: 200 }, newKey()));
  show('refund 500 (more than is left)', await apiCall('POST', `${path}/refunds`, { amount: 500 }, newKey()));

  await needsReview();

  const succeeded = await apiCall('GET', '/v1/payments?status=succeeded&pageSize=100');
  console.log(
    `\nGET /v1/payments?status=succeeded → ${(succeeded.body.payments as unknown[] | undefined)?.length ?? 0} payment(s)`,
  );
  console.log('\nIn the Temporal web UI:');
  for (const status of [
    'succeeded',
    'authorized',
    'declined',
    'unknown',
    'needs_review',
    'failed',
  ] satisfies PaymentStatus[]) {
    console.log(
      `  ${status.padEnd(13)} ${UI}/namespaces/${config.TEMPORAL_NAMESPACE}/workflows?query=${encodeURIComponent(`PaymentStatus="${status}"`)}`,
    );
  }
  await showProviderCalls();
  if (receiver) await showWebhooks(receiver);
}

/**
 * Sets the dev merchant's webhook endpoint to a receiver of the demo's own; undefined (with a note) when the API has
 * no merchant webhooks (no database, or MERCHANT_WEBHOOKS=false).
 */
async function receiveWebhooks(): Promise<DemoReceiver | undefined> {
  const receiver = await startDemoReceiver();
  const put = await apiCall('PUT', '/v1/webhook-endpoint', { url: receiver.url });
  if (put.status !== 200) {
    await receiver.close();
    console.log(`(webhooks to the merchant: not enabled on this API, HTTP ${put.status}; the demo runs without)\n`);
    return undefined;
  }
  receiver.useSecret(put.body.secret as string);
  console.log(
    `Webhooks: PUT /v1/webhook-endpoint ${receiver.url} → secret ${String(put.body.secret).slice(0, 12)}...\n`,
  );
  return receiver;
}

/**
 * Waits until the events stop coming (2 s without one, at most 30 s), prints them by payment, then removes the
 * endpoint: the receiver ends with the demo, and events for a dead endpoint would be retried for three days.
 */
async function showWebhooks(receiver: DemoReceiver): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    const last = receiver.received.at(-1)?.atMs ?? 0;
    if (receiver.received.length > 0 && Date.now() - last > 2_000) break;
    await new Promise((r) => setTimeout(r, 250));
  }
  await apiCall('DELETE', '/v1/webhook-endpoint');
  await receiver.close();
  const byId = new Map<string, { e: (typeof receiver.received)[number]; deliveries: number }>();
  for (const e of receiver.received) {
    const seen = byId.get(e.event.id);
    byId.set(e.event.id, { e: seen?.e ?? e, deliveries: (seen?.deliveries ?? 0) + 1 });
  }
  const events = [...byId.values()].sort((x, y) =>
    x.e.event.data.payment.updatedAt.localeCompare(y.e.event.data.payment.updatedAt),
  );
  console.log(`\nWebhooks the demo's receiver got (${events.length} events, by the payment's updatedAt):`);
  for (const { e, deliveries } of events) {
    const p = e.event.data.payment;
    console.log(
      `  ${e.event.type.padEnd(22)} ${p.key.slice(-12)} ${p.status.padEnd(12)} captured=${p.amountCaptured} ` +
        `refunded=${p.amountRefunded} ${e.signed ? 'signature ok' : 'BAD SIGNATURE'}` +
        `${deliveries > 1 ? ` (${deliveries} deliveries, one id)` : ''}`,
    );
  }
  console.log('  (the endpoint was removed again: DELETE /v1/webhook-endpoint)');
}

/** The worker's provider-call counters: the 503-then-success charge shows as an original attempt and a retry. */
async function showProviderCalls(): Promise<void> {
  if (config.WORKER_METRICS_ADDRESS === 'off') return;
  const url = `http://${config.WORKER_METRICS_ADDRESS}/metrics`;
  try {
    const text = await (await fetch(url, { signal: AbortSignal.timeout(5_000) })).text();
    console.log(`\nProvider calls counted by the worker (${url}):`);
    for (const line of text.split('\n').filter((l) => l.startsWith('payments_provider_calls_total{')))
      console.log(`  ${line.replace('payments_provider_calls_total', '')}`);
  } catch (err) {
    console.log(`\n(worker metrics at ${url} not reachable: ${err instanceof Error ? err.message : String(err)})`);
  }
}

/** Polls a status list (visibility is eventually consistent) until it shows `key`; bounded. */
async function listUntil(status: PaymentStatus, key: string, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const page = await apiCall('GET', `/v1/payments?status=${status}&pageSize=100`);
    if ((page.body.payments as PaymentView[] | undefined)?.some((p) => p.key === key)) return true;
    if (Date.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, 300));
  }
}

/** Unknown → reconcile → needs_review → operator resolves: only when the configured timings make it quick. */
async function needsReview(): Promise<void> {
  const create = retrySpecFor('create', config.providerCapabilities, config.retry.create);
  const expectedMs = create.budgetMs + reconcileWindowMs(config.timings) + config.timings.submitWaitMs;
  if (expectedMs > REVIEW_PATH_LIMIT_MS) {
    console.log(
      `  ${'needs_review'.padEnd(44)} skipped: it takes ~${Math.round(expectedMs / 60_000)} min with these timings.\n` +
        `  ${''.padEnd(44)} For a quick run start the stack AND the demo with e.g.\n` +
        `  ${''.padEnd(44)} RECONCILE_SCHEDULE_MS=2000,3000 SETTLE_WINDOW_MS=1000 UNKNOWN_SWEEP_THRESHOLD_MS=60000 \\\n` +
        `  ${''.padEnd(44)} RETRY_CREATE_BUDGET_MS=16000 RETRY_CREATE_MAX_ATTEMPTS=2 PROVIDER_TOTAL_TIMEOUT_MS=5000`,
    );
    return;
  }
  const orderId = newOrder();
  // Every create for this order fails with 500 (nothing committed): unknown, then reconcile finds nothing.
  await call('POST', `${sim}/_sim/faults`, {
    rules: [{ match: { operation: 'create', reference: orderId }, fault: 'status', status: 500 }],
  });
  const key = newKey();
  await apiCall(
    'POST',
    '/v1/payments',
    { orderId, amount: { value: 1_000, currency: 'EUR' }, paymentMethod: 'pm_card_visa' },
    key,
  );
  show('provider keeps failing: unknown', await waitFor(key, (v) => v.status === 'unknown', expectedMs));
  const listed = await listUntil('unknown', key, 10_000);
  console.log(`  ${''.padEnd(44)} GET /v1/payments?status=unknown lists it: ${listed}`);
  const review = await waitFor(key, (v) => v.status === 'needs_review', expectedMs);
  show('reconcile found nothing: needs_review', review);
  const path = `/v1/payments/${encodeURIComponent(key)}`;
  show(
    'operator resolves: failed',
    await call(
      'POST',
      `${api}${path}/resolve?merchantId=${encodeURIComponent(merchantId)}`,
      { outcome: 'failed', note: 'demo: checked the provider dashboard' },
      { authorization: `Bearer ${operatorToken}` },
    ),
  );
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
