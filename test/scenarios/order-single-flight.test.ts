/**
 * One open payment per order (docs/http-api.md, "Payments"; docs/architecture.md, key scopes): while a payment for
 * (merchant, orderId) is pending or unknown (or in review with its create undecided), a new key for that order is
 * 409 `payment_in_flight` naming the open key. Real API, PaymentsClient, workers and simulator on the run's dev
 * server; an open payment is held by simulator faults, and the simulator's ledger says whether a second charge left.
 */
import { randomUUID } from 'node:crypto';
import { WorkflowNotFoundError } from '@temporalio/client';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { PaymentInFlight, PaymentsClient } from '../../src/client';
import { chargeWorkflowId } from '../../src/domain/ids';
import type { PaymentTimings } from '../../src/domain/workflow-inputs';
import { connectDevServer } from '../helpers/servers';
import { type ApiWorld, chargeBody, newKey, startWorld, testTimings } from '../helpers/world';
import { eventually } from '../helpers/eventually';

let env: TestWorkflowEnvironment;
let h: ApiWorld;

/** Reconcile checks every second; the resubmission with the same key comes after the settle window. */
const timings: PaymentTimings = {
  ...testTimings,
  settleWindowMs: 3_000,
  reconcileScheduleMs: [1_000, 1_000, 1_000, 1_000, 1_000, 1_000],
};

beforeAll(async () => {
  env = await connectDevServer();
  h = await startWorld(env, { api: true, timings, splitPaymentMerchants: ['b'] });
}, 60_000);

afterAll(async () => {
  await h?.close();
  await env?.teardown();
});

/** The create requests that reached the simulator for one order, and how many distinct provider keys they carried. */
function creates(orderId: string) {
  const requests = h.ledger().requests.filter((r) => r.operation === 'create' && r.reference === orderId);
  const effects = h.ledger().effects.filter((e) => e.operation === 'create' && e.reference === orderId);
  return { requests, keys: new Set(requests.map((r) => r.idempotency_key)).size, effects: effects.length };
}

/** Every create for this order answers 500 before committing, `times` times. */
const fail500 = (orderId: string, times?: number) =>
  h.sim.addFaults({
    rules: [
      {
        match: { operation: 'create', reference: orderId },
        fault: 'status',
        status: 500,
        ...(times === undefined ? {} : { times }),
      },
    ],
  });

const waitForStatus = (key: string, status: string, token = h.a.token) =>
  eventually(
    `payment ${key} to be ${status}`,
    async () => {
      const view = await h.request('GET', `/v1/payments/${encodeURIComponent(key)}`, { token });
      return view.body.status === status && view;
    },
    40_000,
  );

describe('one open payment per order', () => {
  it('refuses a second key while the first is unknown (409 naming it), replays the first key, and allows a new key once it settled', async () => {
    const orderId = `order_${randomUUID()}`;
    fail500(orderId, 2); // both create attempts: unknown; the reconcile's resubmission then succeeds
    const first = newKey();
    const body = chargeBody({ orderId });

    const opened = await h.request('POST', '/v1/payments', { key: first, body });
    expect(opened.status).toBe(202);
    expect(opened.body.status).toBe('unknown');

    const second = await h.request('POST', '/v1/payments', { key: newKey(), body });
    const otherAmount = await h.request('POST', '/v1/payments', {
      key: newKey(),
      body: { ...body, amount: { value: 2_500, currency: 'EUR' } },
    });
    const repeat = await h.request('POST', '/v1/payments', { key: first, body });

    for (const refused of [second, otherAmount]) {
      expect(refused.status).toBe(409);
      expect(refused.body.error).toMatchObject({ type: 'payment_in_flight', paymentKey: first });
    }
    expect(repeat.status).toBe(202);
    expect(repeat.headers.get('idempotent-replayed')).toBe('true');
    expect(repeat.body.key).toBe(first);
    // Nothing of the refused keys reached the provider: every create request carries the first key.
    expect(creates(orderId).keys).toBe(1);

    await waitForStatus(first, 'succeeded');
    const after = await h.request('POST', '/v1/payments', { key: newKey(), body });
    expect(after.status).toBe(200);
    expect(after.body.status).toBe('succeeded');
    expect(creates(orderId)).toMatchObject({ keys: 2, effects: 2 });
  }, 60_000);

  it('holds the order while its create is in review, until an operator decides; a decline frees it at once', async () => {
    const orderId = `order_${randomUUID()}`;
    fail500(orderId); // every create and resubmission: the reconcile ends in needs_review
    const first = newKey();
    const body = chargeBody({ orderId });
    expect((await h.request('POST', '/v1/payments', { key: first, body })).status).toBe(202);
    await waitForStatus(first, 'needs_review');

    const refused = await h.request('POST', '/v1/payments', { key: newKey(), body });
    expect(refused.status).toBe(409);
    expect(refused.body.error).toMatchObject({ type: 'payment_in_flight', paymentKey: first });

    const resolved = await h.request('POST', `/v1/payments/${first}/resolve?merchantId=${h.a.id}`, {
      token: h.operator.token,
      body: { outcome: 'failed', note: 'nothing at the provider' },
    });
    expect(resolved.status).toBe(200);
    expect(resolved.body.status).toBe('failed');
    h.sim.clearFaults();
    const declinedOrder = `order_${randomUUID()}`;
    const declined = await h.request('POST', '/v1/payments', {
      key: newKey(),
      body: chargeBody({ orderId: declinedOrder, paymentMethod: 'pm_decline_insufficient_funds' }),
    });
    expect(declined.body.status).toBe('declined');

    const afterReview = await h.request('POST', '/v1/payments', { key: newKey(), body });
    const afterDecline = await h.request('POST', '/v1/payments', {
      key: newKey(),
      body: chargeBody({ orderId: declinedOrder }),
    });
    expect([afterReview.status, afterReview.body.status]).toEqual([200, 'succeeded']);
    expect([afterDecline.status, afterDecline.body.status]).toEqual([200, 'succeeded']);
  }, 90_000);

  it('replays a known key’s own first answer before any order check: a declined key repeats its decline while another key holds the order', async () => {
    const orderId = `order_${randomUUID()}`;
    const declinedKey = newKey();
    const declinedBody = chargeBody({ orderId, paymentMethod: 'pm_decline_insufficient_funds' });
    const declined = await h.request('POST', '/v1/payments', { key: declinedKey, body: declinedBody });
    expect([declined.status, declined.body.status]).toEqual([200, 'declined']);

    fail500(orderId); // the next key's create stays unknown: it holds the order
    const holder = newKey();
    const held = await h.request('POST', '/v1/payments', { key: holder, body: chargeBody({ orderId }) });
    expect([held.status, held.body.status]).toEqual([202, 'unknown']);

    const repeat = await h.request('POST', '/v1/payments', { key: declinedKey, body: declinedBody });
    expect({ status: repeat.status, replayed: repeat.headers.get('idempotent-replayed') }).toEqual({
      status: 200,
      replayed: 'true',
    });
    expect(repeat.body).toEqual(declined.body);
    // The same key with another body is still 422 (its own record answers), not the order's 409.
    const reused = await h.request('POST', '/v1/payments', {
      key: declinedKey,
      body: { ...declinedBody, amount: { value: 7, currency: 'EUR' } },
    });
    expect({ status: reused.status, type: reused.body.error?.type }).toEqual({
      status: 422,
      type: 'idempotency_key_reused',
    });
    // A new key is still refused for the order.
    const refused = await h.request('POST', '/v1/payments', { key: newKey(), body: chargeBody({ orderId }) });
    expect(refused.body.error).toMatchObject({ type: 'payment_in_flight', paymentKey: holder });
    h.sim.clearFaults();
  }, 60_000);

  it('is off for a merchant that splits payments, and everywhere with orderSingleFlight: false', async () => {
    const splitOrder = `order_${randomUUID()}`;
    fail500(splitOrder, 2);
    const open = await h.request('POST', '/v1/payments', {
      key: newKey(),
      body: chargeBody({ orderId: splitOrder }),
      token: h.b.token,
    });
    expect(open.body.status).toBe('unknown');
    const split = await h.request('POST', '/v1/payments', {
      key: newKey(),
      body: chargeBody({ orderId: splitOrder }),
      token: h.b.token,
    });
    expect([split.status, split.body.status]).toEqual([200, 'succeeded']);
    expect(creates(splitOrder).keys).toBe(2);

    const globalOrder = `order_${randomUUID()}`;
    fail500(globalOrder, 2);
    const opened = await h.payments.charge(h.a.id, newKey(), chargeBody({ orderId: globalOrder }));
    expect(opened.view.status).toBe('unknown');
    await expect(h.payments.charge(h.a.id, newKey(), chargeBody({ orderId: globalOrder }))).rejects.toBeInstanceOf(
      PaymentInFlight,
    );
    const unguarded = new PaymentsClient(env.client, {
      taskQueue: h.taskQueue,
      timings,
      providers: ['simulator'],
      orderSingleFlight: false,
    });
    const second = await unguarded.charge(h.a.id, newKey(), chargeBody({ orderId: globalOrder }));
    expect(second.view.status).toBe('succeeded');
    expect(creates(globalOrder).keys).toBe(2);
  }, 60_000);

  it('holds the order from the payment’s start, before any workflow task ran (search attributes set at start)', async () => {
    // No worker polls this task queue: the workflow starts, but its code never runs and upserts nothing.
    const idle = new PaymentsClient(env.client, {
      taskQueue: `no-worker-${randomUUID()}`,
      timings: { ...timings, submitWaitMs: 500 },
      rpcTimeoutMs: 1_000,
      providers: ['simulator'],
    });
    const orderId = `order_${randomUUID()}`;
    const first = newKey();
    const started = idle.charge(h.a.id, first, chargeBody({ orderId })).catch((err: unknown) => err);
    try {
      const workflowId = chargeWorkflowId(h.a.id, first);
      await eventually('the payment to be listed pending by its order', async () => {
        const { executions } = await env.client.workflowService.listWorkflowExecutions({
          namespace: env.namespace ?? 'default',
          query: `OrderId = '${orderId}' AND MerchantId = '${h.a.id}' AND PaymentStatus = 'pending'`,
        });
        return executions.some((e) => e.execution?.workflowId === workflowId);
      });
      const history = await env.client.workflow.getHandle(workflowId).fetchHistory();
      expect(history.events?.some((e) => e.workflowTaskCompletedEventAttributes)).toBe(false);

      const refused = idle.charge(h.a.id, newKey(), chargeBody({ orderId }));
      await expect(refused).rejects.toBeInstanceOf(PaymentInFlight);
      await expect(refused).rejects.toMatchObject({ paymentKey: first });
    } finally {
      await started;
      await env.client.workflow
        .getHandle(chargeWorkflowId(h.a.id, first))
        .terminate('test cleanup')
        .catch((err: unknown) => {
          if (!(err instanceof WorkflowNotFoundError)) throw err;
        });
    }
  }, 30_000);
});
