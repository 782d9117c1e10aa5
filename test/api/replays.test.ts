/**
 * A repeat is a replay (docs/http-api.md "Repeats"): a write repeated with the same key and body answers its first
 * final answer, status code and body as first answered, with `Idempotent-Replayed: true`, whatever happened to the
 * payment since; while that first answer was a 202 and the operation has not settled, a repeat answers its progress.
 * Charge, capture and refund, through the real API, client, workers and simulator on the run's dev server; and a
 * capture's body: none, `{}` or `{ amount }` in minor units, a partial capture final, its remainder released.
 */
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import type { PaymentTimings } from '../../src/domain/workflow-inputs';
import { connectDevServer } from '../helpers/servers';
import {
  type ApiWorld,
  type ApiResponse,
  chargeBody,
  newKey,
  startWorld,
  testRetry,
  testTimings,
} from '../helpers/world';
import { eventually } from '../helpers/eventually';

let env: TestWorkflowEnvironment;
let h: ApiWorld;

/** A reconcile that checks every 1.5 s and resubmits after 4 s; refunds for 25 s, then the payment closes. */
const timings: PaymentTimings = {
  ...testTimings,
  settleWindowMs: 4_000,
  reconcileScheduleMs: [1_500, 1_500, 1_500, 1_500, 1_500, 1_500],
  refundWindowMs: 25_000,
};

beforeAll(async () => {
  env = await connectDevServer();
  h = await startWorld(env, { api: true, timings });
}, 60_000);

afterAll(async () => {
  await h?.close();
  await env?.teardown();
});

const replayed = (res: ApiResponse) => res.headers.get('idempotent-replayed');

/** A manual-capture payment, authorized (200). */
async function authorized(body = chargeBody({ capture: 'manual' }), world = h) {
  const key = newKey();
  const res = await world.request('POST', '/v1/payments', { key, body });
  expect([res.status, res.body.status]).toEqual([200, 'authorized']);
  return { key, body, res };
}

const capture = (key: string, captureKey: string, body: unknown = {}, world = h) =>
  world.request('POST', `/v1/payments/${key}/capture`, { key: captureKey, body });
const refund = (key: string, refundKey: string, amount: number, world = h) =>
  world.request('POST', `/v1/payments/${key}/refunds`, { key: refundKey, body: { amount } });

describe('a repeated charge replays its first final answer', () => {
  it('answers authorized, as first answered, after the payment was captured and refunded', async () => {
    const { key, body, res: first } = await authorized();
    expect((await capture(key, newKey())).status).toBe(200);
    expect((await refund(key, newKey(), 400)).status).toBe(200);

    const repeat = await h.request('POST', '/v1/payments', { key, body });
    expect({ status: repeat.status, replayed: replayed(repeat) }).toEqual({ status: 200, replayed: 'true' });
    expect(repeat.body).toEqual(first.body);
    expect(repeat.body).toMatchObject({ status: 'authorized', amountCaptured: 0, amountRefunded: 0 });
  }, 60_000);

  it('answers progress (202) while its outcome is unknown, then the final answer it reached, and that one after', async () => {
    const body = chargeBody();
    // Both create attempts answer 500: unknown; the reconcile's resubmission with the same key then succeeds.
    h.sim.addFaults({
      rules: [
        { match: { operation: 'create', reference: body.orderId as string }, fault: 'status', status: 500, times: 2 },
      ],
    });
    const key = newKey();
    const first = await h.request('POST', '/v1/payments', { key, body });
    expect([first.status, first.body.status]).toEqual([202, 'unknown']);
    const early = await h.request('POST', '/v1/payments', { key, body });
    expect({ status: early.status, state: early.body.status, replayed: replayed(early) }).toEqual({
      status: 202,
      state: 'unknown',
      replayed: 'true',
    });

    const settled = await eventually(
      'the reconcile to find the payment',
      async () => {
        const view = await h.request('GET', `/v1/payments/${key}`);
        return view.body.status === 'succeeded' && view;
      },
      40_000,
    );
    expect((await refund(key, newKey(), 300)).status).toBe(200);

    const repeat = await h.request('POST', '/v1/payments', { key, body });
    expect({ status: repeat.status, replayed: replayed(repeat) }).toEqual({ status: 200, replayed: 'true' });
    expect(repeat.body).toMatchObject({ status: 'succeeded', amountCaptured: 1_000, amountRefunded: 0 });
    expect(repeat.body).toEqual({ ...settled.body, updatedAt: repeat.body.updatedAt });
  }, 60_000);

  it('answers its first answer after the payment closed (refund window over), not the closed run’s result', async () => {
    // Its own world, whose payments close 5 s after they succeeded: the other tests' stay open through all their steps.
    const closing = await startWorld(env, { api: true, timings: { ...timings, refundWindowMs: 5_000 } });
    try {
      const key = newKey();
      const body = chargeBody();
      const first = await closing.request('POST', '/v1/payments', { key, body });
      expect([first.status, first.body.status]).toEqual([200, 'succeeded']);
      expect((await refund(key, newKey(), 250, closing)).status).toBe(200);
      await eventually(
        'the payment to close after its refund window',
        async () => {
          const description = await env.client.workflow.getHandle(`charge:${closing.a.id}:${key}`).describe();
          return description.status.name === 'COMPLETED';
        },
        60_000,
      );

      const repeat = await closing.request('POST', '/v1/payments', { key, body });
      expect({ status: repeat.status, replayed: replayed(repeat) }).toEqual({ status: 200, replayed: 'true' });
      expect(repeat.body).toEqual(first.body);
    } finally {
      await closing.close();
    }
  }, 90_000);
});

describe('a repeated capture or refund replays its first final answer', () => {
  it('answers the capture’s and the refund’s own first answers, marked replayed, after later refunds', async () => {
    const { key } = await authorized();
    const captureKey = newKey();
    const captured = await capture(key, captureKey, { amount: 1_000 });
    expect({ status: captured.status, replayed: replayed(captured) }).toEqual({ status: 200, replayed: null });
    const refundKey = newKey();
    const refunded = await refund(key, refundKey, 300);
    expect({ status: refunded.status, replayed: replayed(refunded) }).toEqual({ status: 200, replayed: null });
    expect((await refund(key, newKey(), 200)).status).toBe(200);

    const captureAgain = await capture(key, captureKey, { amount: 1_000 });
    expect({ status: captureAgain.status, replayed: replayed(captureAgain) }).toEqual({
      status: 200,
      replayed: 'true',
    });
    expect(captureAgain.body).toEqual(captured.body);
    expect(captureAgain.body).toMatchObject({ amountCaptured: 1_000, amountRefunded: 0 });

    const refundAgain = await refund(key, refundKey, 300);
    expect({ status: refundAgain.status, replayed: replayed(refundAgain) }).toEqual({ status: 200, replayed: 'true' });
    expect(refundAgain.body).toEqual(refunded.body);
    expect(refundAgain.body).toMatchObject({ amountRefunded: 300 });
  }, 60_000);

  it('replays a refusal by the provider (422 provider_rejected), marked replayed', async () => {
    const { key, body } = await authorized();
    h.sim.addFaults({
      rules: [
        { match: { operation: 'capture', reference: body.orderId as string }, fault: 'status', status: 400, times: 1 },
      ],
    });
    const captureKey = newKey();
    const first = await capture(key, captureKey);
    expect({ status: first.status, type: first.body.error?.type, replayed: replayed(first) }).toEqual({
      status: 422,
      type: 'provider_rejected',
      replayed: null,
    });
    const repeat = await capture(key, captureKey);
    expect({ status: repeat.status, replayed: replayed(repeat) }).toEqual({ status: 422, replayed: 'true' });
    expect(repeat.body).toEqual(first.body);
  }, 60_000);

  it('answers a slow capture’s progress (202) until it settled, then the answer it settled with', async () => {
    // Its own world, whose captures and refunds answer 202 after 4 s instead of 8, and whose captures retry at most
    // 0.5 s apart: the one the provider answers after the held one is not a growing backoff later.
    const slow = await startWorld(env, {
      api: true,
      timings,
      operationWaitMs: 4_000,
      retry: { ...testRetry, capture: { initialIntervalMs: 200, maximumIntervalMs: 500 } },
    });
    try {
      const { key, body } = await authorized(undefined, slow);
      // Longer than two of the client's waits: the first answer and a repeat are 202s; the capture settles after the
      // latency.
      slow.sim.addFaults({
        rules: [
          {
            match: { operation: 'capture', reference: body.orderId as string },
            fault: 'latency',
            latency_ms: 12_000,
            times: 1,
          },
        ],
      });
      const captureKey = newKey();
      const first = await capture(key, captureKey, {}, slow);
      expect({ status: first.status, replayed: replayed(first) }).toEqual({ status: 202, replayed: null });
      const early = await capture(key, captureKey, {}, slow);
      expect({ status: early.status, replayed: replayed(early) }).toEqual({ status: 202, replayed: 'true' });
      expect(early.body.operations).toEqual([expect.objectContaining({ key: captureKey, state: 'running' })]);

      // The capture's own state, not the payment's: a webhook may show the money captured while the call still runs.
      await eventually(
        'the capture to settle',
        async () => {
          const view = await slow.request('GET', `/v1/payments/${key}`);
          const ops = (view.body.operations ?? []) as { key: string; state: string }[];
          return ops.some((o) => o.key === captureKey && o.state === 'succeeded');
        },
        60_000,
      );
      const settled = await capture(key, captureKey, {}, slow);
      expect({ status: settled.status, replayed: replayed(settled) }).toEqual({ status: 200, replayed: 'true' });
      expect(settled.body).toMatchObject({ status: 'succeeded', amountCaptured: 1_000, amountRefunded: 0 });
      expect((await refund(key, newKey(), 100, slow)).status).toBe(200);
      const later = await capture(key, captureKey, {}, slow);
      expect({ status: later.status, replayed: replayed(later) }).toEqual({ status: 200, replayed: 'true' });
      expect(later.body).toEqual(settled.body);
    } finally {
      await slow.close();
    }
  }, 90_000);
});

describe('a capture’s body', () => {
  it('captures everything authorized with no body at all, with an empty JSON body and with {}', async () => {
    for (const send of [
      (key: string) => h.request('POST', `/v1/payments/${key}/capture`, { key: newKey() }),
      (key: string) =>
        h.request('POST', `/v1/payments/${key}/capture`, {
          key: newKey(),
          rawBody: '',
          headers: { 'content-type': 'application/json' },
        }),
      (key: string) => capture(key, newKey(), {}),
    ]) {
      const { key } = await authorized();
      const res = await send(key);
      expect({ status: res.status, body: res.body }).toEqual({
        status: 200,
        body: expect.objectContaining({ status: 'succeeded', amountCaptured: 1_000 }),
      });
      expect(res.body.amountReleased).toBeUndefined();
    }
  }, 60_000);

  it('takes `amount` in minor units; a partial capture is final and shows the released remainder', async () => {
    const { key } = await authorized();
    const partial = await capture(key, newKey(), { amount: 400 });
    expect(partial.status).toBe(200);
    expect(partial.body).toMatchObject({ status: 'succeeded', amountAuthorized: 1_000, amountCaptured: 400 });
    expect(partial.body.amountReleased).toBe(600);

    const rest = await capture(key, newKey(), { amount: 600 });
    expect({ status: rest.status, type: rest.body.error?.type }).toEqual({ status: 409, type: 'invalid_transition' });
    const money = await capture(key, newKey(), { amount: { value: 100, currency: 'EUR' } });
    expect({ status: money.status, fields: money.body.error?.fields?.map((f) => f.path) }).toEqual({
      status: 400,
      fields: ['amount'],
    });
    // The provider released it too: only the 400 were ever captured there.
    const effects = h.ledger().effects.filter((e) => e.operation === 'capture' && e.reference === partial.body.orderId);
    expect(effects.map((e) => e.amount)).toEqual([400]);
    expect((await h.request('GET', `/v1/payments/${key}`)).body.amountReleased).toBe(600);
  }, 60_000);
});
