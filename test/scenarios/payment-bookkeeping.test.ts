/**
 * What a payment remembers about its requests, through the real stack (API, client, workers, simulator with webhooks
 * to the API, the run's shared dev server): a refund still running whose webhook already arrived is counted once
 * (issue 19 item 11), and every request refused by the payment's rules is answered its refusal, however many are
 * refused at once (issue 19 item 15).
 */
import { randomUUID } from 'node:crypto';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { refundFingerprint } from '../../src/client/fingerprint';
import { refundRequest } from '../../src/domain/definitions';
import { chargeWorkflowId } from '../../src/domain/ids';
import type { PaymentView } from '../../src/domain/payment';
import { connectDevServer } from '../helpers/servers';
import { type ApiWorld, chargeBody, newKey, startWorld, testRetry, testTimings } from '../helpers/world';
import { eventually } from '../helpers/eventually';

let env: TestWorkflowEnvironment;
let h: ApiWorld;

beforeAll(async () => {
  env = await connectDevServer();
  h = await startWorld(env, {
    api: true,
    timings: testTimings,
    // A refund attempt that lost its answer is repeated (same key) after 0.1-0.2 s.
    retry: { ...testRetry, refund: { initialIntervalMs: 100, maximumIntervalMs: 200, maximumAttempts: 4 } },
  });
}, 60_000);

afterEach(() => h?.sim.clearFaults());

afterAll(async () => {
  await h?.close();
  await env?.teardown();
});

const viewOf = async (key: string) => (await h.request('GET', `/v1/payments/${key}`)).body as unknown as PaymentView;

it('a refund whose webhook came before its answer is counted once: the rest of the captured amount stays refundable', async () => {
  const key = newKey();
  const body = chargeBody();
  const orderId = body.orderId as string;
  expect((await h.request('POST', '/v1/payments', { key, body })).status).toBe(200);
  h.sim.addFaults({
    rules: [
      // The first refund commits and its answer is lost; its webhook reaches the payment while the repeat of the call
      // (same key, answered from the provider's record) waits 1 s.
      { match: { operation: 'refund', reference: orderId }, fault: 'commit_then_drop', times: 1 },
      { match: { operation: 'refund', reference: orderId }, fault: 'latency', latency_ms: 1_000, times: 1 },
    ],
  });
  const firstKey = newKey();
  const first = h.request('POST', `/v1/payments/${key}/refunds`, { key: firstKey, body: { amount: 600 } });
  await eventually('the refund’s webhook applied while the refund still runs', async () => {
    const v = await viewOf(key);
    return v.amountRefunded === 600 && v.operations?.find((o) => o.key === firstKey)?.state === 'running';
  });
  // 1000 captured, 600 refunded (the running refund, already shown): 400 are left.
  const second = await h.request('POST', `/v1/payments/${key}/refunds`, { key: newKey(), body: { amount: 400 } });
  expect(second.status).toBe(200);
  expect(second.body).toMatchObject({ amountCaptured: 1_000, amountRefunded: 1_000 });
  expect((await first).status).toBe(200);
  const effects = h.ledger().effects.filter((e) => e.reference === orderId && e.operation === 'refund');
  expect(effects.map((e) => e.amount).sort()).toEqual([400, 600]);
}, 60_000);

it('a refusal is answered to its request even when forty more are refused right after it (never 202)', async () => {
  const key = newKey();
  const body = chargeBody();
  const orderId = body.orderId as string;
  expect((await h.request('POST', '/v1/payments', { key, body })).status).toBe(200);
  const handle = env.client.workflow.getHandle(chargeWorkflowId(h.a.id, key));
  // Other API processes' refund requests of 500 each, past their checks: signalled as the client signals them.
  const otherRequest = (refundKey = newKey()) =>
    handle.signal(refundRequest.requested, {
      refundKey,
      fingerprint: refundFingerprint(key, { amount: 500 }),
      amount: 500,
      requestId: randomUUID(),
    });
  // The first refund is held 4 s by the provider (503 with Retry-After); every request after it waits for it.
  h.sim.addFaults({
    rules: [
      { match: { operation: 'refund', reference: orderId }, fault: 'status', status: 503, retry_after_s: 4, times: 1 },
    ],
  });
  const first = h.request('POST', `/v1/payments/${key}/refunds`, { key: newKey(), body: { amount: 500 } });
  await eventually(
    'the first refund held by the provider',
    async () => h.ledger().requests.some((r) => r.reference === orderId && r.operation === 'refund'),
    15_000,
  );
  // Another process's refund of the other 500 is queued first: ours passes its check (500 still refundable) and is
  // refused when its turn comes; forty more refused requests follow it.
  await otherRequest();
  const ourKey = newKey();
  const ours = h.request('POST', `/v1/payments/${key}/refunds`, { key: ourKey, body: { amount: 500 } });
  // The first refund's request and the other process's are in history: the next one is ours.
  await eventually('our request in the payment’s history', async () => {
    const events = (await handle.fetchHistory()).events ?? [];
    const requests = events.filter((e) => e.workflowExecutionSignaledEventAttributes?.signalName === 'refundRequested');
    return requests.length === 3;
  });
  await Promise.all(Array.from({ length: 40 }, () => otherRequest()));

  const answer = await ours;
  expect(`${answer.status} ${answer.body.error?.type ?? ''}`).toBe('422 amount_exceeded');
  expect((await first).status).toBe(200);
  expect(await viewOf(key)).toMatchObject({ status: 'succeeded', amountRefunded: 1_000 });
  const effects = h.ledger().effects.filter((e) => e.reference === orderId && e.operation === 'refund');
  expect(effects.map((e) => e.amount)).toEqual([500, 500]);
}, 60_000);
