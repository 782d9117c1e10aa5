/**
 * What operators see, on the real stack (dev server, workers, API, simulator over HTTP) with payload encryption on:
 * the history of a charge holds no payment-method token in plain text, the codec endpoints decode it for operators
 * only, the workflow carries its summary, details and activity summaries, and both metric registries count what
 * happened (provider calls original and retry, retry delays, reconciles, webhooks, API requests).
 */
import { Client } from '@temporalio/client';
import { defaultPayloadConverter } from '@temporalio/common';
import { temporal } from '@temporalio/proto';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker } from '@temporalio/worker';
import { Registry } from 'prom-client';
import { AesGcmPayloadCodec, ENCRYPTED_ENCODING, newPayloadKey, parsePayloadKeys } from '../../src/codec';
import { chargeWorkflowId } from '../../src/domain/ids';
import { createApiMetrics } from '../../src/metrics/api-metrics';
import { type MetricsServer, serveMetrics } from '../../src/metrics/serve';
import { createWorkerMetrics } from '../../src/metrics/worker-metrics';
import { workflowBundle } from '../helpers/payments';
import { connectDevServer } from '../helpers/servers';
import { type ApiHarness, chargeBody, eventually, newKey, startApiHarness } from './harness';

const UI_ORIGIN = 'http://127.0.0.1:18233';
const codec = new AesGcmPayloadCodec(parsePayloadKeys(newPayloadKey('test1')));

let env: TestWorkflowEnvironment;
let h: ApiHarness;
let workerMetricsServer: MetricsServer;
/** A client that reads the histories and descriptions the way an operator with the keys would. */
let decoding: Client;

beforeAll(async () => {
  env = await connectDevServer();
  const workerMetrics = createWorkerMetrics(new Registry());
  workerMetricsServer = await serveMetrics(workerMetrics.registry, '127.0.0.1', 0);
  h = await startApiHarness(env, {
    codec: { codec, corsOrigins: [UI_ORIGIN] },
    apiMetrics: createApiMetrics(new Registry()),
    workerMetrics,
    // A create whose outcome stayed unknown is reconciled within seconds: checks after 1 s and 2 s, then (past the
    // settle window) one resubmission with the same key.
    timings: { reconcileScheduleMs: [1_000, 1_000, 2_000, 60_000], settleWindowMs: 1_500 },
  });
  decoding = new Client({ connection: env.connection, dataConverter: { payloadCodecs: [codec] } });
}, 60_000);

afterAll(async () => {
  await h?.close();
  await workerMetricsServer?.close();
  await env?.teardown();
});

/** Every byte of a workflow's history as stored by the server. */
async function rawHistory(workflowId: string): Promise<Buffer> {
  const history = await env.client.workflow.getHandle(workflowId).fetchHistory();
  return Buffer.from(temporal.api.history.v1.History.encode(history).finish());
}

const scrape = async (url: string) => {
  const res = await fetch(url);
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toContain('text/plain');
  return res.text();
};

/** The value of one series in Prometheus text, 0 when absent. */
function sample(text: string, name: string, labels: Record<string, string>): number {
  const wanted = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  const line = text
    .split('\n')
    .find((l) => l.startsWith(`${name}{`) && wanted.every((w) => l.slice(0, l.indexOf('}')).includes(w)));
  return line === undefined ? 0 : Number(line.slice(line.lastIndexOf(' ') + 1));
}

describe('encrypted payloads', () => {
  it('keeps the payment-method token out of the stored history; the codec client reads the payment back', async () => {
    const key = newKey();
    const body = chargeBody({ paymentMethod: 'pm_card_visa_secret_4242' });
    const res = await h.request('POST', '/v1/payments', { key, body });
    expect(res.status).toBe(200);
    const workflowId = chargeWorkflowId(h.a.id, key);

    const stored = await rawHistory(workflowId);
    expect(stored.includes('pm_')).toBe(false);
    expect(stored.includes(body.orderId as string)).toBe(true); // the OrderId search attribute is plain, on purpose
    expect(stored.includes(ENCRYPTED_ENCODING)).toBe(true);

    // What the server stores decodes to the input, for a client with the keys.
    const history = await decoding.workflow.getHandle(workflowId).fetchHistory();
    const started = history.events?.[0]?.workflowExecutionStartedEventAttributes?.input?.payloads?.[0];
    const [input] = await codec.decode([started!]);
    expect(JSON.stringify(defaultPayloadConverter.fromPayload(input!))).toContain('pm_card_visa_secret_4242');
    expect((await h.request('GET', `/v1/payments/${key}`)).body).toMatchObject({ key, status: 'succeeded' });

    // An encrypted history replays on a worker with the keys (the deploy check of docs/operations.md).
    const replay = { workflowBundle: await workflowBundle(), dataConverter: { payloadCodecs: [codec] } };
    await expect(Worker.runReplayHistory(replay, history, workflowId)).resolves.toBeUndefined();
  });
});

describe('codec endpoints', () => {
  const sealed = async () => {
    const [p] = await codec.encode([defaultPayloadConverter.toPayload({ paymentMethod: 'pm_card_visa' })]);
    return {
      payloads: [
        {
          metadata: Object.fromEntries(
            Object.entries(p!.metadata!).map(([k, v]) => [k, Buffer.from(v!).toString('base64')]),
          ),
          data: Buffer.from(p!.data!).toString('base64'),
        },
      ],
    };
  };
  const decodedText = (body: Record<string, unknown>) => {
    const [p] = (body.payloads as { data: string }[]) ?? [];
    return Buffer.from(p?.data ?? '', 'base64').toString('utf8');
  };

  it('decodes for an operator token (header or path) and for nobody else', async () => {
    const payloads = await sealed();
    const byHeader = await h.request('POST', '/codec/decode', { body: payloads, token: h.operator.token });
    const byPath = await h.request('POST', `/codec/operator/${h.operator.token}/decode`, {
      body: payloads,
      token: null,
    });
    const merchant = await h.request('POST', '/codec/decode', { body: payloads });
    const anonymous = await h.request('POST', '/codec/decode', { body: payloads, token: null });
    const wrongPath = await h.request('POST', `/codec/operator/${h.a.token}/decode`, { body: payloads, token: null });

    expect(byHeader.status).toBe(200);
    expect(decodedText(byHeader.body)).toContain('pm_card_visa');
    expect(byPath.status).toBe(200);
    expect(byPath.body).toEqual(byHeader.body);
    expect([merchant.status, anonymous.status, wrongPath.status]).toEqual([403, 401, 401]);
  });

  it('encodes with the current key, and decode passes unencrypted payloads through', async () => {
    const plain = {
      payloads: [{ metadata: { encoding: Buffer.from('json/plain').toString('base64') }, data: 'e30=' }],
    };
    const encoded = await h.request('POST', '/codec/encode', { body: plain, token: h.operator.token });
    const meta = (encoded.body.payloads as { metadata: Record<string, string> }[])[0]?.metadata ?? {};
    expect(Buffer.from(meta.encoding ?? '', 'base64').toString()).toBe(ENCRYPTED_ENCODING);
    const passed = await h.request('POST', '/codec/decode', { body: plain, token: h.operator.token });
    expect(passed.body).toEqual(plain);
  });

  it('answers CORS for the web UI origin only, preflight included', async () => {
    const preflight = (origin: string) =>
      fetch(`${h.url}/codec/decode`, {
        method: 'OPTIONS',
        headers: {
          origin,
          'access-control-request-method': 'POST',
          'access-control-request-headers': 'content-type,x-namespace',
        },
      });
    const ui = await preflight(UI_ORIGIN);
    const other = await preflight('http://evil.example');
    expect(ui.status).toBe(204);
    expect(ui.headers.get('access-control-allow-origin')).toBe(UI_ORIGIN);
    expect(ui.headers.get('access-control-allow-headers')).toContain('x-namespace');
    expect(other.headers.get('access-control-allow-origin')).toBeNull();
    // A refused request still carries CORS headers, so the UI can show why.
    const refused = await h.request('POST', '/codec/decode', {
      body: await sealed(),
      token: null,
      headers: { origin: UI_ORIGIN },
    });
    expect(refused.status).toBe(401);
    expect(refused.headers.get('access-control-allow-origin')).toBe(UI_ORIGIN);
  });
});

describe('the payment tells its story', () => {
  it('carries a summary, static and current details, and activity summaries', async () => {
    const key = newKey();
    const body = chargeBody({ amount: { value: 1_000, currency: 'EUR' } });
    expect((await h.request('POST', '/v1/payments', { key, body })).status).toBe(200);
    const handle = decoding.workflow.getHandle(chargeWorkflowId(h.a.id, key));

    const description = await handle.describe();
    await expect(description.staticSummary()).resolves.toBe(
      `EUR 10.00 for order ${body.orderId as string} (merchant ${h.a.id}, simulator)`,
    );
    const details = await description.staticDetails();
    expect(details).toContain('capture: automatic');
    expect(details).not.toContain('pm_');

    const metadata = await handle.query<{ currentDetails?: string }>('__temporal_workflow_metadata');
    expect(metadata.currentDetails).toContain('**succeeded** after 1 provider attempt');
    expect(metadata.currentDetails).toContain('captured EUR 10.00');

    const history = await handle.fetchHistory();
    // A clean charge's create is its local first attempt (shape 3): a marker carrying the summary, no activity task.
    const create = history.events?.find((e) => e.markerRecordedEventAttributes);
    const [summary] = await codec.decode([create!.userMetadata!.summary!]);
    expect(defaultPayloadConverter.fromPayload(summary!)).toBe('create payment at simulator (local first attempt)');
    expect(history.events?.filter((e) => e.activityTaskScheduledEventAttributes)).toEqual([]);
  });
});

describe('metrics', () => {
  it('counts a 503-then-success payment as an original failed attempt (the local first one) and a retry that succeeded', async () => {
    const key = newKey();
    const body = chargeBody();
    h.sim.addFaults({
      rules: [
        { match: { operation: 'create', reference: body.orderId as string }, fault: 'status', status: 503, times: 1 },
      ],
    });
    const before = await scrape(workerMetricsServer.url);
    const res = await h.request('POST', '/v1/payments', { key, body });
    expect(res.status).toBe(200);

    const after = await scrape(workerMetricsServer.url);
    const delta = (labels: Record<string, string>) =>
      sample(after, 'payments_provider_calls_total', labels) - sample(before, 'payments_provider_calls_total', labels);
    const create = { provider: 'simulator', operation: 'create' };
    // The first attempt runs locally on the workflow's worker (shape 3) and is counted there, by the provider's class
    // (not the local bound's BudgetExhausted); the create activity that takes over with the same key is the retry.
    expect(delta({ ...create, outcome: 'ProviderUnavailable', attempt: 'original' })).toBe(1);
    expect(delta({ ...create, outcome: 'succeeded', attempt: 'retry' })).toBe(1);
    expect(delta({ ...create, outcome: 'BudgetExhausted', attempt: 'original' })).toBe(0);
    expect(delta({ ...create, outcome: 'succeeded', attempt: 'original' })).toBe(0);
    // No delay was chosen: without a Retry-After the activity takes over from the local attempt at once.
    expect(
      sample(after, 'payments_provider_retry_delay_seconds_count', { ...create, outcome: 'ProviderUnavailable' }) -
        sample(before, 'payments_provider_retry_delay_seconds_count', { ...create, outcome: 'ProviderUnavailable' }),
    ).toBe(0);
    expect(after).toContain('payments_provider_call_duration_seconds_bucket{');
  });

  it('counts a reconcile that starts after an unknown outcome and ends found', async () => {
    const body = chargeBody();
    // Both create attempts answer 500 (unknown; testRetry allows two): the payment goes unknown and reconciles; its
    // resubmission with the same key is then answered.
    h.sim.addFaults({
      rules: [
        { match: { operation: 'create', reference: body.orderId as string }, fault: 'status', status: 500, times: 2 },
      ],
    });
    const before = await scrape(workerMetricsServer.url);
    const key = newKey();
    await h.request('POST', '/v1/payments', { key, body });
    await eventually(
      'the reconcile to find the payment',
      async () => (await h.request('GET', `/v1/payments/${key}`)).body.status === 'succeeded',
      30_000,
    );
    const labels = { provider: 'simulator', operation: 'create' };
    const after = await eventually(
      'the reconcile counters',
      async () => {
        const text = await scrape(workerMetricsServer.url);
        const ended = sample(text, 'payments_reconciles_ended_total', { ...labels, outcome: 'found' });
        return ended > sample(before, 'payments_reconciles_ended_total', { ...labels, outcome: 'found' }) && text;
      },
      10_000,
    );
    expect(
      sample(after, 'payments_reconciles_started_total', labels) -
        sample(before, 'payments_reconciles_started_total', labels),
    ).toBe(1);
    expect(sample(after, 'payments_reconciles_ended_total', { ...labels, outcome: 'needs_review' })).toBe(
      sample(before, 'payments_reconciles_ended_total', { ...labels, outcome: 'needs_review' }),
    );
  }, 60_000);

  it('serves the API’s requests by route and status, latency histograms and webhooks at GET /metrics', async () => {
    const key = newKey();
    expect((await h.request('POST', '/v1/payments', { key, body: chargeBody() })).status).toBe(200);
    await h.sim.flushWebhooks();
    const text = await eventually(
      'a webhook to be counted',
      async () => {
        const t = await scrape(`${h.url}/metrics`);
        return sample(t, 'payments_webhooks_received_total', { provider: 'simulator' }) > 0 && t;
      },
      10_000,
    );
    const post = { method: 'POST', route: '/v1/payments', status: '200' };
    expect(sample(text, 'payments_api_requests_total', post)).toBeGreaterThan(0);
    expect(sample(text, 'payments_api_request_duration_seconds_count', post)).toBeGreaterThan(0);
    expect(text).toContain(
      'payments_api_request_duration_seconds_bucket{le="0.005",method="POST",route="/v1/payments"',
    );
    expect(
      sample(text, 'payments_webhooks_applied_total', { provider: 'simulator', delivery: 'payment' }) +
        sample(text, 'payments_webhooks_duplicate_total', { provider: 'simulator' }),
    ).toBeGreaterThan(0);
    // Route patterns, never raw URLs: no key in any label.
    expect(text).not.toContain(key);
  });
});
