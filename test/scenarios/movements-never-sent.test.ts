/**
 * A capture or refund that provably never left (every attempt refused before sending: an open breaker, a provider-wide
 * cool-down, a refused connection) is a refusal the caller can act on, through the real stack (API, client, workers,
 * simulator over HTTP): 503 `provider_unavailable` with `Retry-After`, the operation recorded `failed` with its reason,
 * nothing locked (another capture or refund is not `operation_in_flight`), and a repeat of the same key tries again.
 *
 * The pause comes from one 429 with `Retry-After: 180` on another payment's request: the provider-wide cool-down holds
 * every write to the provider for at most PROVIDER_MAX_RETRY_AFTER_MS (here 5 s), longer than the movement's budget.
 */
import type { TestWorkflowEnvironment } from '@temporalio/testing';
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

const maxRetryAfterMs = 5_000;
/** A budget with no room for a wait of seconds: the cool-down outlasts it (an attempt needs 2.5 s of the 3 s). */
const shortCapture = { initialIntervalMs: 200, maximumIntervalMs: 500, attemptTimeoutMs: 2_500, budgetMs: 3_000 };
/** As for capture: a refund attempt may make two calls (the refund, then the read of the payment). */
const shortRefund = { initialIntervalMs: 200, maximumIntervalMs: 500, attemptTimeoutMs: 4_000, budgetMs: 4_500 };

let env: TestWorkflowEnvironment;
/** Captures cannot wait out a pause (refunds can). */
let captures: ApiWorld;
/** Refunds cannot wait out a pause (captures can). */
let refunds: ApiWorld;

beforeAll(async () => {
  env = await connectDevServer();
  // Short reconcile checks: a movement wrongly taken for unknown would reach review within seconds.
  const timings = { ...testTimings, reconcileScheduleMs: [500, 500] };
  [captures, refunds] = await Promise.all([
    startWorld(env, { api: true, timings, retry: { ...testRetry, capture: shortCapture }, maxRetryAfterMs }),
    startWorld(env, { api: true, timings, retry: { ...testRetry, refund: shortRefund }, maxRetryAfterMs }),
  ]);
});
afterAll(async () => {
  await Promise.all([captures?.close(), refunds?.close()]);
  await env?.teardown();
});

/** A payment through the API: `manual` ends authorized, `automatic` succeeded. */
async function payment(h: ApiWorld, capture: 'manual' | 'automatic') {
  const key = newKey();
  const body = chargeBody({ capture });
  const res = await h.request('POST', '/v1/payments', { key, body });
  expect(res.status).toBe(200);
  return { key, orderId: body.orderId as string };
}

/**
 * Answers a 429 with `Retry-After: 180` to the next `operation` on `orderId` that `send` makes, and waits until it was
 * answered (not for `send`'s own answer: it comes once the pause is over).
 */
async function oneRateLimit<T>(
  h: ApiWorld,
  operation: 'capture' | 'refund',
  orderId: string,
  send: () => Promise<T>,
): Promise<{ readonly answer: Promise<T> }> {
  h.sim.addFaults({
    rules: [{ match: { operation, reference: orderId }, fault: 'status', status: 429, retry_after_s: 180, times: 1 }],
  });
  const answer = send();
  await eventually(`the 429 to ${operation} of ${orderId}`, async () =>
    h.ledger().requests.some((r) => r.operation === operation && r.reference === orderId && r.status === 429),
  );
  return { answer };
}

/** What a never-sent movement's answer says. */
const answerOf = (res: ApiResponse) => ({
  status: res.status,
  type: res.body.error?.type,
  retryAfterS: Number(res.headers.get('retry-after')),
});

/** Repeats `send` after each Retry-After until it is answered otherwise (at most a few pauses). */
async function afterThePause(first: ApiResponse, send: () => Promise<ApiResponse>): Promise<ApiResponse> {
  let res = first;
  for (let i = 0; i < 4 && res.status === 503; i++) {
    await new Promise((r) => setTimeout(r, Number(res.headers.get('retry-after') ?? '1') * 1000));
    res = await send();
  }
  return res;
}

const requestsOf = (h: ApiWorld, operation: string, orderId: string) =>
  h
    .ledger()
    .requests.filter((r) => r.operation === operation && r.reference === orderId)
    .map((r) => r.status);
const effectsOf = (h: ApiWorld, operation: string, orderId: string) =>
  h
    .ledger()
    .effects.filter((e) => e.operation === operation && e.reference === orderId)
    .map((e) => e.amount);

it('a capture held off by a 429 Retry-After 180 elsewhere: 503 with Retry-After, failed, nothing locked; the key tries again', async () => {
  const h = captures;
  const p = await payment(h, 'manual');
  const q = await payment(h, 'automatic');
  // Q's refund gets the 429: it waits out the capped pause (its budget has room) and then refunds.
  const qRefund = await oneRateLimit(h, 'refund', q.orderId, () =>
    h.request('POST', `/v1/payments/${q.key}/refunds`, { key: newKey(), body: { amount: 500 } }),
  );

  const k1 = newKey();
  const capture = (key: string, body: unknown = {}, target = p.key) =>
    h.request('POST', `/v1/payments/${target}/capture`, { key, body });
  const first = await capture(k1);
  // Nothing locked: another capture of the same payment is refused the same way, not 409 operation_in_flight.
  const k2 = newKey();
  const second = await capture(k2);
  // The operations settle (a movement wrongly taken for unknown would be reconciled into review meanwhile).
  const settled = await eventually('both captures settled', async () => {
    const view = (await h.request('GET', `/v1/payments/${p.key}`)).body as { operations?: { state: string }[] };
    return view.operations?.every((o) => o.state !== 'running') === true && view;
  });
  expect({ first: answerOf(first), second: answerOf(second), view: settled }).toMatchObject({
    first: { status: 503, type: 'provider_unavailable', retryAfterS: expect.any(Number) },
    second: { status: 503, type: 'provider_unavailable' },
    view: {
      status: 'authorized',
      amountCaptured: 0,
      operations: [
        { kind: 'capture', key: k1, state: 'failed', reason: expect.stringContaining('provider_unavailable') },
        { kind: 'capture', key: k2, state: 'failed', reason: expect.stringContaining('provider_unavailable') },
      ],
    },
  });
  // Never longer than the cap (plus jitter-free rounding up), never 0.
  expect(answerOf(first).retryAfterS).toBeGreaterThanOrEqual(1);
  expect(answerOf(first).retryAfterS).toBeLessThanOrEqual(maxRetryAfterMs / 1000);
  // The key stays this payment's and this request's: another body, or another payment, is 422.
  expect((await capture(k1, { amount: 300 })).status).toBe(422);
  expect((await capture(k1, {}, q.key)).status).toBe(422);
  expect(requestsOf(h, 'capture', p.orderId)).toEqual([]); // the provider never saw a capture

  // Once the pause is over the same key tries again, and captures.
  const again = await afterThePause(first, () => capture(k1));
  expect(again.status).toBe(200);
  expect(again.body).toMatchObject({
    status: 'succeeded',
    amountCaptured: 1_000,
    operations: [
      { key: k1, state: 'succeeded' },
      { key: k2, state: 'failed' },
    ],
  });
  // The ledger shows exactly what was sent: one capture of P; Q's refund refused once, then sent once.
  expect(requestsOf(h, 'capture', p.orderId)).toEqual([200]);
  expect(effectsOf(h, 'capture', p.orderId)).toEqual([1_000]);
  expect([200, 202]).toContain((await qRefund.answer).status);
  await eventually('Q refunded after the capped pause', async () => {
    const view = (await h.request('GET', `/v1/payments/${q.key}`)).body;
    return view.amountRefunded === 500;
  });
  expect(requestsOf(h, 'refund', q.orderId)).toEqual([429, 200]);
  expect(effectsOf(h, 'refund', q.orderId)).toEqual([500]);
});

it('a refund held off the same way: 503 with Retry-After, failed, refundable in full; the key tries again', async () => {
  const h = refunds;
  const p = await payment(h, 'automatic');
  const q = await payment(h, 'manual');
  // Q's capture gets the 429: it waits out the capped pause (its budget has room) and then captures.
  const qCapture = await oneRateLimit(h, 'capture', q.orderId, () =>
    h.request('POST', `/v1/payments/${q.key}/capture`, { key: newKey(), body: {} }),
  );

  const r1 = newKey();
  const refund = (key: string, amount: number) =>
    h.request('POST', `/v1/payments/${p.key}/refunds`, { key, body: { amount } });
  const first = await refund(r1, 1_000);
  // Nothing locked, nothing held back: a second refund of the whole amount is refused the same way, not 409/422.
  const second = await refund(newKey(), 1_000);
  const view = (await h.request('GET', `/v1/payments/${p.key}`)).body;
  expect({ first: answerOf(first), second: answerOf(second), view }).toMatchObject({
    first: { status: 503, type: 'provider_unavailable' },
    second: { status: 503, type: 'provider_unavailable' },
    view: {
      status: 'succeeded',
      amountRefunded: 0,
      operations: [
        { kind: 'refund', key: r1, state: 'failed' },
        { kind: 'refund', state: 'failed' },
      ],
    },
  });
  expect(requestsOf(h, 'refund', p.orderId)).toEqual([]);

  const again = await afterThePause(first, () => refund(r1, 1_000));
  expect(again.status).toBe(200);
  expect(again.body).toMatchObject({ amountRefunded: 1_000 });
  expect(requestsOf(h, 'refund', p.orderId)).toEqual([200]);
  expect(effectsOf(h, 'refund', p.orderId)).toEqual([1_000]);
  expect([200, 202]).toContain((await qCapture.answer).status);
  await eventually('Q captured after the capped pause', async () => {
    const view = (await h.request('GET', `/v1/payments/${q.key}`)).body;
    return view.amountCaptured === 1_000;
  });
  expect(requestsOf(h, 'capture', q.orderId)).toEqual([429, 200]);
});
