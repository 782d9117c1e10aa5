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
import { type ApiWorld, chargeBody, newKey, startWorld } from '../helpers/world';
import { eventually } from '../helpers/eventually';

const UI_ORIGIN = 'http://127.0.0.1:18233';
/** A web UI that sends no credential of ours (development): its origin may decode without a token. */
const TRUSTED_UI_ORIGIN = 'http://127.0.0.1:18234';
const codec = new AesGcmPayloadCodec(parsePayloadKeys(newPayloadKey('test1')));

let env: TestWorkflowEnvironment;
let h: ApiWorld;
let workerMetricsServer: MetricsServer;
/** A client that reads the histories and descriptions the way an operator with the keys would. */
let decoding: Client;

beforeAll(async () => {
  env = await connectDevServer();
  const workerMetrics = createWorkerMetrics(new Registry());
  workerMetricsServer = await serveMetrics(workerMetrics.registry, '127.0.0.1', 0);
  h = await startWorld(env, {
    api: true,
    codec: { codec, corsOrigins: [UI_ORIGIN, TRUSTED_UI_ORIGIN], trustedOrigins: [TRUSTED_UI_ORIGIN] },
    apiMetrics: createApiMetrics(new Registry()),
    workerMetrics,
    // A create whose outcome stayed unknown is reconciled within seconds: checks after 1 s and 2 s, then (past the
    // settle window) a resubmission with the same key at each check.
    timings: { reconcileScheduleMs: [1_000, 1_000, 2_000, 60_000], settleWindowMs: 1_500 },
  });
  decoding = new Client({ connection: env.connection, dataConverter: { payloadCodecs: [codec] } });
}, 60_000);

afterAll(async () => {
  await h?.close();
  await workerMetricsServer?.close();
  await env?.teardown();
});

/** The order's first create answers 503 (with the simulator's own error code), the next succeeds. */
const fail503Once = (orderId: string) =>
  h.sim.addFaults({
    rules: [{ match: { operation: 'create', reference: orderId }, fault: 'status', status: 503, times: 1 }],
  });

/** A payload as the codec endpoint takes it (proto3 JSON: bytes base64). */
function asJson(p: { metadata?: Record<string, Uint8Array | null> | null; data?: Uint8Array | null }) {
  return {
    metadata: Object.fromEntries(
      Object.entries(p.metadata ?? {}).map(([k, v]) => [k, Buffer.from(v ?? []).toString('base64')]),
    ),
    data: Buffer.from(p.data ?? []).toString('base64'),
  };
}

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

/** Every failure of a history's events (with their causes), as stored: activity failures, markers, children. */
function failuresOf(history: temporal.api.history.v1.IHistory): temporal.api.failure.v1.IFailure[] {
  const out: temporal.api.failure.v1.IFailure[] = [];
  const walk = (v: unknown): void => {
    if (Array.isArray(v)) v.forEach(walk);
    else if (v !== null && typeof v === 'object' && !(v instanceof Uint8Array)) {
      for (const [k, child] of Object.entries(v)) {
        if ((k === 'failure' || k === 'cause') && child) out.push(child as temporal.api.failure.v1.IFailure);
        walk(child);
      }
    }
  };
  walk(history.events);
  return out;
}

describe('encrypted failures', () => {
  it('keeps provider error text out of the stored history: failure messages and stacks are ciphertext too', async () => {
    const key = newKey();
    const body = chargeBody();
    // The provider's own words (its error code) go into the failure message of the attempt it answered.
    fail503Once(body.orderId as string);
    expect((await h.request('POST', '/v1/payments', { key, body })).status).toBe(200);
    const workflowId = chargeWorkflowId(h.a.id, key);

    const stored = await rawHistory(workflowId);
    expect(stored.includes('simulated_fault')).toBe(false);
    expect(stored.includes('HTTP 503')).toBe(false);
    expect(stored.includes('ProviderUnavailable on create')).toBe(false);
    expect(stored.includes('.ts:')).toBe(false); // no stack trace (file:line) in plain text

    const failures = failuresOf(await env.client.workflow.getHandle(workflowId).fetchHistory());
    expect(failures.length).toBeGreaterThan(0);
    for (const f of failures) {
      expect({ message: f.message, stack: f.stackTrace ?? '' }).toEqual({ message: 'Encoded failure', stack: '' });
      expect(f.encodedAttributes?.metadata?.encoding).toEqual(Buffer.from(ENCRYPTED_ENCODING));
    }

    // The codec endpoint decodes them for the web UI (which asks for `encodedAttributes` as any other payload).
    const attrs = failures[0]!.encodedAttributes!;
    const decoded = await h.request('POST', '/codec/decode', {
      body: { payloads: [asJson(attrs)] },
      token: h.operator.token,
    });
    expect(decoded.status).toBe(200);
    const [opened] = decoded.body.payloads as { data: string }[];
    const restored = JSON.parse(Buffer.from(opened?.data ?? '', 'base64').toString()) as { message: string };
    expect(restored.message).toContain('simulated_fault');
  });
});

describe('codec endpoints', () => {
  const sealed = async () => {
    const [p] = await codec.encode([defaultPayloadConverter.toPayload({ paymentMethod: 'pm_card_visa' })]);
    return { payloads: [asJson(p!)] };
  };
  const decodedText = (body: Record<string, unknown>) => {
    const [p] = (body.payloads as { data: string }[]) ?? [];
    return Buffer.from(p?.data ?? '', 'base64').toString('utf8');
  };

  it('decodes for an operator or codec token, and without one only for a trusted web UI origin', async () => {
    const payloads = await sealed();
    const byOperator = await h.request('POST', '/codec/decode', { body: payloads, token: h.operator.token });
    const byCodecToken = await h.request('POST', '/codec/decode', { body: payloads, token: h.codecReader.token });
    const byTrustedUi = await h.request('POST', '/codec/decode', {
      body: payloads,
      token: null,
      headers: { origin: TRUSTED_UI_ORIGIN },
    });
    const merchant = await h.request('POST', '/codec/decode', { body: payloads });
    const anonymous = await h.request('POST', '/codec/decode', { body: payloads, token: null });
    const otherOrigin = await h.request('POST', '/codec/decode', {
      body: payloads,
      token: null,
      headers: { origin: UI_ORIGIN },
    });
    const trustedWithBadToken = await h.request('POST', '/codec/decode', {
      body: payloads,
      token: 'tok_not_a_token_of_ours_0123',
      headers: { origin: TRUSTED_UI_ORIGIN },
    });

    for (const ok of [byOperator, byCodecToken, byTrustedUi]) {
      expect(ok.status).toBe(200);
      expect(decodedText(ok.body)).toContain('pm_card_visa');
    }
    expect([merchant.status, anonymous.status, otherOrigin.status, trustedWithBadToken.status]).toEqual([
      403, 401, 401, 401,
    ]);
    // No credential in a URL: the path-token route of old is gone (a token in the path is no credential), and the
    // answer echoes nothing.
    const pathToken = await h.request('POST', `/codec/operator/${h.operator.token}/decode`, {
      body: payloads,
      token: null,
      headers: { origin: TRUSTED_UI_ORIGIN },
    });
    expect(pathToken.status).toBe(401);
    expect(JSON.stringify(pathToken.body)).not.toContain(h.operator.token);
  });

  it('a codec token decodes and does nothing else: no encode, no resolve, no payment', async () => {
    const asReader = { token: h.codecReader.token };
    const encode = await h.request('POST', '/codec/encode', { ...asReader, body: await sealed() });
    const resolve = await h.request('POST', `/v1/payments/${newKey()}/resolve?merchantId=${h.a.id}`, {
      ...asReader,
      body: { outcome: 'failed', note: 'a codec token tries' },
    });
    const charge = await h.request('POST', '/v1/payments', { ...asReader, key: newKey(), body: chargeBody() });
    const read = await h.request('GET', `/v1/payments/${newKey()}`, asReader);
    const items = await h.request('POST', `/v1/review-items/review:simulator:pay_1/resolve`, {
      ...asReader,
      body: { action: 'no_action', note: 'a codec token tries' },
    });
    for (const res of [encode, resolve, charge, read, items]) {
      expect({ status: res.status, type: res.body.error?.type }).toEqual({ status: 403, type: 'forbidden' });
    }
    // The trusted origin alone (no token) is no credential anywhere else.
    const fromUi = await h.request('POST', `/v1/payments/${newKey()}/resolve?merchantId=${h.a.id}`, {
      token: null,
      headers: { origin: TRUSTED_UI_ORIGIN },
      body: { outcome: 'failed', note: 'the UI tries' },
    });
    expect(fromUi.status).toBe(401);
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

  it('decodes a batch payload by payload: one of an unknown key comes back as it came, the others decoded', async () => {
    const good = (await sealed()).payloads[0]!;
    const other = new AesGcmPayloadCodec(parsePayloadKeys(newPayloadKey('retired')));
    const [foreign] = await other.encode([defaultPayloadConverter.toPayload({ paymentMethod: 'pm_card_old' })]);
    const unknownKey = asJson(foreign!);
    const res = await h.request('POST', '/codec/decode', {
      body: { payloads: [good, unknownKey, good] },
      token: h.operator.token,
    });
    expect(res.status).toBe(200);
    const out = res.body.payloads as { data: string }[];
    expect(out).toHaveLength(3);
    expect(decodedText({ payloads: [out[0]] })).toContain('pm_card_visa');
    expect(out[1]).toEqual(unknownKey);
    expect(decodedText({ payloads: [out[2]] })).toContain('pm_card_visa');
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

    // A clean charge's create is its local first attempt (shape 3): its marker names the step in the web UI.
    const history = await handle.fetchHistory();
    const create = history.events?.find((e) => e.markerRecordedEventAttributes);
    expect(history.events?.filter((e) => e.activityTaskScheduledEventAttributes)).toEqual([]);
    const [summary] = await codec.decode([create!.userMetadata!.summary!]);
    expect(defaultPayloadConverter.fromPayload(summary!)).toBe('create payment at simulator (local first attempt)');
  });

  it('names the create that takes over from a failed local first attempt, on the provider’s own queue', async () => {
    const key = newKey();
    const body = chargeBody();
    fail503Once(body.orderId as string);
    expect((await h.request('POST', '/v1/payments', { key, body })).status).toBe(200);
    const history = await decoding.workflow.getHandle(chargeWorkflowId(h.a.id, key)).fetchHistory();
    const create = history.events?.find((e) => e.activityTaskScheduledEventAttributes);
    const [summary] = await codec.decode([create!.userMetadata!.summary!]);
    expect(defaultPayloadConverter.fromPayload(summary!)).toBe('create payment at simulator');
    // The bulkhead: the provider call runs on the provider's own task queue.
    expect(create?.activityTaskScheduledEventAttributes?.taskQueue?.name).toBe(`${h.taskQueue}.provider.simulator`);
  });
});

describe('metrics', () => {
  it('counts a 503-then-success payment as an original failed attempt, a retry that succeeded, and a retry delay', async () => {
    const key = newKey();
    const body = chargeBody();
    fail503Once(body.orderId as string);
    const before = await scrape(workerMetricsServer.url);
    const res = await h.request('POST', '/v1/payments', { key, body });
    expect(res.status).toBe(200);

    const after = await scrape(workerMetricsServer.url);
    const delta = (labels: Record<string, string>) =>
      sample(after, 'payments_provider_calls_total', labels) - sample(before, 'payments_provider_calls_total', labels);
    const create = { provider: 'simulator', operation: 'create' };
    expect(delta({ ...create, outcome: 'ProviderUnavailable', attempt: 'original' })).toBe(1);
    expect(delta({ ...create, outcome: 'succeeded', attempt: 'retry' })).toBe(1);
    expect(
      sample(after, 'payments_provider_retry_delay_seconds_count', { ...create, outcome: 'ProviderUnavailable' }) -
        sample(before, 'payments_provider_retry_delay_seconds_count', { ...create, outcome: 'ProviderUnavailable' }),
    ).toBe(1);
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
