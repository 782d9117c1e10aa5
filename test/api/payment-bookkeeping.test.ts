/**
 * What a payment remembers about its requests, through the real stack (API, client, workers, simulator with webhooks
 * to the API, the run's shared dev server): a refund still running whose webhook already arrived is counted once
 * (issue 19 item 11).
 */
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import type { PaymentView } from '../../src/domain/payment';
import { connectDevServer } from '../helpers/servers';
import { type ApiHarness, chargeBody, eventually, newKey, startApiHarness, testRetry, testTimings } from './harness';

let env: TestWorkflowEnvironment;
let h: ApiHarness;

beforeAll(async () => {
  env = await connectDevServer();
  h = await startApiHarness(env, {
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
