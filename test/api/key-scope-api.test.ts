/**
 * A capture/refund key belongs to its first request, merchant-wide: reused on another payment it is 422
 * `idempotency_key_reused` before that payment's own rules answer (found by the money model: a refund key reused on an
 * authorized payment answered 409 about that payment's state).
 */
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { connectDevServer } from '../helpers/servers';
import { type ApiWorld, chargeBody, newKey, startWorld } from '../helpers/world';

let env: TestWorkflowEnvironment;
let h: ApiWorld;

beforeAll(async () => {
  env = await connectDevServer();
  h = await startWorld(env, { api: true });
});
afterAll(async () => {
  await h?.close();
  await env?.teardown();
});

it('a refund key used on a captured payment, reused on an authorized one: 422, no request at the provider', async () => {
  const captured = newKey();
  expect((await h.request('POST', '/v1/payments', { key: captured, body: chargeBody() })).status).toBe(200);
  const authorized = newKey();
  const manual = await h.request('POST', '/v1/payments', { key: authorized, body: chargeBody({ capture: 'manual' }) });
  expect(manual.body).toMatchObject({ status: 'authorized' });
  const refundKey = newKey();
  const first = await h.request('POST', `/v1/payments/${captured}/refunds`, { key: refundKey, body: { amount: 100 } });
  expect(first.status).toBe(200);
  const refundsBefore = h.ledger().requests.filter((r) => r.operation === 'refund').length;

  const reused = await h.request('POST', `/v1/payments/${authorized}/refunds`, {
    key: refundKey,
    body: { amount: 100 },
  });
  expect(reused.status).toBe(422);
  expect(reused.body.error?.type).toBe('idempotency_key_reused');
  // The same key on its own payment still replays its first answer.
  const again = await h.request('POST', `/v1/payments/${captured}/refunds`, { key: refundKey, body: { amount: 100 } });
  expect(again.status).toBe(200);
  expect(h.ledger().requests.filter((r) => r.operation === 'refund')).toHaveLength(refundsBefore);
});
