/**
 * Through the real stack (API, client, workers, simulator) on a dev server of its own whose continue-as-new suggestion
 * threshold is tiny, so payments continue as new after a few dozen history events:
 * - a repeat POST for a payment that continued as new and then closed is checked against the fingerprint of the
 *   chain (the memo each run carries; the client falls back to the first run's);
 * - webhooks the simulator delivers out of order and twice are applied forward only and once each: the final view
 *   equals the provider's payment, and the dedup set the payment carries into its next run holds each event once.
 */
import { randomUUID } from 'node:crypto';
import { defaultPayloadConverter } from '@temporalio/common';
import type { temporal } from '@temporalio/proto';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { startDevServer } from '../../scripts/lib/dev-server';
import { ensureReconcileSignal } from '../../src/domain/definitions';
import { chargeWorkflowId } from '../../src/domain/ids';
import type { PaymentView } from '../../src/domain/payment';
import type { Payment } from '../../src/simulator/server';
import { signWebhook } from '../../src/simulator/signature';
import type { ChargeWorkflowInput } from '../../src/domain/workflow-inputs';
import type { ChargeContinuation } from '../../src/workflows/charge';
import { type ApiWorld, WEBHOOK_SECRET, chargeBody, newKey, startWorld } from '../helpers/world';
import { eventually } from '../helpers/eventually';

let env: TestWorkflowEnvironment;

beforeAll(async () => {
  env = await startDevServer({
    extraArgs: ['--dynamic-config-value', 'limit.historyCount.suggestContinueAsNew=40'],
  });
}, 60_000);
afterAll(async () => {
  await env?.teardown();
});

type History = temporal.api.history.v1.IHistory;

/** The histories of a workflow's runs, first to latest, following each run's continued-as-new event. */
async function runChain(workflowId: string): Promise<{ runId: string; history: History }[]> {
  const first = await env.client.workflow.getHandle(workflowId).describe();
  let runId: string | null | undefined = first.raw.workflowExecutionInfo?.firstRunId;
  const chain: { runId: string; history: History }[] = [];
  while (runId) {
    const history = await env.client.workflow.getHandle(workflowId, runId).fetchHistory();
    chain.push({ runId, history });
    const last = history.events?.at(-1);
    runId = last?.workflowExecutionContinuedAsNewEventAttributes?.newExecutionRunId;
  }
  return chain;
}

/** Waits (bounded) until the workflow's latest run is not `runId`; answers the new one. */
const newRunAfter = (workflowId: string, runId: string) =>
  eventually(
    'a run that continued as new',
    async () => {
      const d = await env.client.workflow.getHandle(workflowId).describe();
      return d.runId !== runId && d.runId;
    },
    20_000,
  );

/**
 * Grows the history with signals that change nothing until the run continues as new (bounded); answers the new run.
 * How many it takes depends on the history shape (a shape-3 charge starts with 14 events, shape 2 with 19) and on how
 * many signals a busy worker takes into one workflow task: a fixed count leaves some runs short of the threshold.
 */
async function signalUntilContinued(workflowId: string, runId: string): Promise<string> {
  const handle = env.client.workflow.getHandle(workflowId);
  for (let i = 0; i < 80; i++) {
    await handle.signal(ensureReconcileSignal);
    if (i >= 10 && (await handle.describe()).runId !== runId) break;
  }
  return newRunAfter(workflowId, runId);
}

const nowS = () => Math.floor(Date.now() / 1000);

describe('the fingerprint check after continue-as-new', () => {
  let h: ApiWorld;
  beforeAll(async () => {
    h = await startWorld(env, { api: true, timings: { refundWindowMs: 8_000 } });
  }, 60_000);
  afterAll(async () => {
    await h?.close();
  });

  /** Posts a signed simulator-shaped event about `view` to the API's webhook route. */
  function deliver(view: PaymentView, eventId: string) {
    const raw = JSON.stringify({
      id: eventId,
      type: 'payment.succeeded',
      created: nowS(),
      data: {
        payment: {
          id: view.providerPaymentId,
          status: 'succeeded',
          amount: view.amount.value,
          amount_captured: view.amountCaptured,
          amount_refunded: 0,
          currency: view.amount.currency,
          reference: view.orderId,
          created: nowS(),
          metadata: { merchant_id: view.merchantId, payment_key: view.key },
        },
      },
    });
    return h.request('POST', '/webhooks/simulator', {
      token: null,
      rawBody: raw,
      headers: { 'sim-signature': signWebhook(WEBHOOK_SECRET, raw, nowS()) },
    });
  }

  it('a repeat for a payment that continued as new and closed: the stored answer; another body is 422', async () => {
    const key = newKey();
    const body = chargeBody();
    const first = await h.request('POST', '/v1/payments', { key, body });
    expect(first.status).toBe(200);
    const view = first.body as unknown as PaymentView;
    const workflowId = chargeWorkflowId(h.a.id, key);
    const firstRunId = (await env.client.workflow.getHandle(workflowId).describe()).runId;

    // A webhook it already knows is answered from a query (no history); signals that change nothing grow the
    // history past the threshold: the payment continues as new.
    expect((await deliver(view, 'evt_redelivered')).body).toEqual({ received: true, delivery: 'duplicate' });
    const handle = env.client.workflow.getHandle(workflowId);
    await signalUntilContinued(workflowId, firstRunId);
    const stored = await eventually(
      'the payment closed after its refund window',
      async () => (await handle.describe()).status.name === 'COMPLETED' && handle.result(),
      30_000,
    );
    expect((await runChain(workflowId)).length).toBeGreaterThan(1);
    expect(stored).toMatchObject({ status: 'succeeded', amountCaptured: 1_000 });

    const repeat = await h.request('POST', '/v1/payments', { key, body });
    expect(repeat.status).toBe(200);
    expect(repeat.headers.get('idempotent-replayed')).toBe('true');
    expect(repeat.body).toEqual(stored);

    const reused = await h.request('POST', '/v1/payments', {
      key,
      body: { ...body, amount: { value: 2_000, currency: 'EUR' } },
    });
    expect(reused.status).toBe(422);
    expect(reused.body.error?.type).toBe('idempotency_key_reused');
    expect(h.ledger().requests.filter((r) => r.operation === 'create' && r.reference === body.orderId)).toHaveLength(1);
  });
});

describe('webhooks delivered out of order and twice, through the API', () => {
  let h: ApiWorld;
  beforeAll(async () => {
    h = await startWorld(env, { api: true });
    // Every event twice; events are held for 3 s and each batch is delivered newest first.
    await h.sim.setMerchant(h.apiKey, {
      idempotency: true,
      webhook_url: `${h.url}/webhooks/simulator`,
      webhook_secret: WEBHOOK_SECRET,
      webhook_duplicate: true,
      webhook_reorder: true,
      webhook_delay_ms: 3_000,
    });
  }, 60_000);
  afterAll(async () => {
    await h?.close();
  });

  /** A call to the simulator's own API, as the merchant's dashboard would make it. */
  async function atProvider(path: string, body: unknown): Promise<Payment> {
    const res = await fetch(`${h.sim.url}${path}`, {
      method: body === undefined ? 'GET' : 'POST',
      headers: {
        authorization: `Bearer ${h.apiKey}`,
        'content-type': 'application/json',
        'idempotency-key': `dash_${randomUUID()}`,
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    expect(res.status).toBe(200);
    return (await res.json()) as Payment;
  }

  it('applies each event once and only forward: the final view equals the provider’s payment', async () => {
    const key = newKey();
    const first = await h.request('POST', '/v1/payments', { key, body: chargeBody({ capture: 'manual' }) });
    expect(first.body).toMatchObject({ status: 'authorized' });
    const paymentId = first.body.providerPaymentId as string;
    // Captured and partly refunded at the provider (its dashboard): the payment learns it only from webhooks.
    await atProvider(`/v1/payments/${paymentId}/capture`, {});
    await atProvider(`/v1/payments/${paymentId}/refunds`, { amount: 300 });
    await h.sim.flushWebhooks();

    const deliveries = h.sim.webhookDeliveries();
    // The three effects' events, each delivered twice, the newest first: what makes this test about order and dedup.
    expect(deliveries.map((d) => d.type)).toEqual([
      'refund.succeeded',
      'refund.succeeded',
      'payment.succeeded',
      'payment.succeeded',
      'payment.authorized',
      'payment.authorized',
    ]);
    expect(deliveries.every((d) => d.status === 200)).toBe(true);
    const eventIds = [...new Set(deliveries.map((d) => d.event_id))];
    expect(eventIds).toHaveLength(3);

    const provider = await atProvider(`/v1/payments/${paymentId}`, undefined);
    expect(provider).toMatchObject({ status: 'succeeded', amount_captured: 1_000, amount_refunded: 300 });
    const expected = {
      providerPaymentId: provider.id,
      status: provider.status,
      amountAuthorized: provider.amount,
      amountCaptured: provider.amount_captured,
      amountRefunded: provider.amount_refunded,
    };
    const readView = async () => (await h.request('GET', `/v1/payments/${key}`)).body as unknown as PaymentView;
    // Signals are accepted before the payment processed them: wait (bounded) until the view settles, then compare.
    await eventually('the view to show the provider’s payment', async () => {
      const v = await readView();
      return v.amountRefunded === provider.amount_refunded && v.status === provider.status;
    }).catch(() => undefined);
    expect(await readView()).toMatchObject(expected);

    // Every delivery was acknowledged; those that told the payment something new reached it as a signal (the API
    // answers the others from a query), a redelivery racing its first copy as well ...
    const workflowId = chargeWorkflowId(h.a.id, key);
    const signalled = (await runChain(workflowId)).flatMap(({ history }) =>
      (history.events ?? []).filter((e) => e.workflowExecutionSignaledEventAttributes?.signalName === 'providerEvent'),
    );
    expect(signalled.length).toBeGreaterThanOrEqual(1);
    const signalledIds = signalled.map(
      (e) =>
        defaultPayloadConverter.fromPayload<{ eventId: string }>(
          e.workflowExecutionSignaledEventAttributes?.input?.payloads?.[0] as temporal.api.common.v1.IPayload,
        ).eventId,
    );
    // ... and the payment remembers each event once: its dedup set, carried into the next run, is observed there.
    const handle = env.client.workflow.getHandle(workflowId);
    const runBefore = (await handle.describe()).runId;
    await signalUntilContinued(workflowId, runBefore);
    const latest = (await runChain(workflowId)).at(-1);
    const payloads = latest?.history.events?.[0]?.workflowExecutionStartedEventAttributes?.input?.payloads ?? [];
    const carried = defaultPayloadConverter.fromPayload<ChargeContinuation>(
      payloads[1] as temporal.api.common.v1.IPayload,
    );
    // A shape-3 payment's input has no provider configuration: the worker's, recorded by its first run, goes with it.
    const input = defaultPayloadConverter.fromPayload<ChargeWorkflowInput>(
      payloads[0] as temporal.api.common.v1.IPayload,
    );
    expect(input.shape).toBe(3);
    expect(input).not.toHaveProperty('capabilities');
    expect(carried.capabilities).toMatchObject({ idempotencyKeys: true });
    expect(carried).toHaveProperty('retry');
    expect([...carried.state.seenEvents].sort()).toEqual([...new Set(signalledIds)].sort());
    expect(carried.state.view).toMatchObject({ amountCaptured: 1_000, amountRefunded: 300, status: 'succeeded' });
  });
});
