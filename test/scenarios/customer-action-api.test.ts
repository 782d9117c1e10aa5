/**
 * A payment that waits for the customer, through the HTTP API over real HTTP, on the dev server with the simulator's
 * webhooks pointed at the API: `POST /v1/payments` with a `pm_3ds` token answers 202 `requires_action` with
 * `nextAction`; a capture meanwhile is 409 `invalid_transition`; the customer (played by a POST to the simulator's
 * authentication page the `nextAction` names) completes it, and the provider's webhook moves the payment on (the wait's
 * first look-up is a minute away here, so only the webhook can end it within the test's bound).
 */
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { PaymentView } from '../../src/domain/payment';
import { connectDevServer } from '../helpers/servers';
import { type ApiWorld, chargeBody, newKey, startWorld } from '../helpers/world';
import { eventually } from '../helpers/eventually';

let env: TestWorkflowEnvironment;
let h: ApiWorld;

beforeAll(async () => {
  env = await connectDevServer();
  h = await startWorld(env, { api: true });
}, 60_000);

afterAll(async () => {
  await h?.close();
  await env?.teardown();
});

/** Plays the customer at the page the payment's `nextAction` names (the simulator's authentication endpoint). */
async function customer(url: string, result: 'succeeded' | 'failed'): Promise<number> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ result }),
  });
  await res.arrayBuffer();
  return res.status;
}

/** Starts a `pm_3ds` payment; answers its key, its first answer and the customer's URL. */
async function waitingPayment(capture: 'automatic' | 'manual' = 'automatic') {
  const key = newKey();
  const body = chargeBody({ paymentMethod: 'pm_3ds_required', capture });
  const first = await h.request('POST', '/v1/payments', { key, body });
  const view = PaymentView.parse(first.body);
  return { key, body, first, view, url: view.nextAction?.url ?? '' };
}

const statusOf = async (key: string) => PaymentView.parse((await h.request('GET', `/v1/payments/${key}`)).body);

describe('a payment that waits for the customer, over the API', () => {
  it('202 requires_action with nextAction; a capture is 409; the customer completes: authorized (one create effect), then captured', async () => {
    const { key, body, first, view, url } = await waitingPayment('manual');
    expect(first.status).toBe(202);
    expect(first.headers.get('location')).toBe(`/v1/payments/${key}`);
    expect(view).toMatchObject({ status: 'requires_action', amountAuthorized: 0 });
    expect(view.nextAction).toEqual({
      type: 'redirect_to_url',
      url: `${h.sim.url}/_sim/payments/${view.providerPaymentId}/authenticate`,
    });
    // A repeat of the key answers the same wait.
    const again = await h.request('POST', '/v1/payments', { key, body });
    expect(again.status).toBe(202);
    expect(again.body).toMatchObject({ status: 'requires_action', nextAction: view.nextAction });

    const capture = await h.request('POST', `/v1/payments/${key}/capture`, { key: newKey(), body: {} });
    expect(capture.status).toBe(409);
    expect(capture.body.error?.type).toBe('invalid_transition');
    expect(h.ledger().requests.filter((r) => r.operation === 'capture')).toHaveLength(0);

    expect(await customer(url, 'succeeded')).toBe(200);
    const done = await eventually('authorized by the webhook', async () => {
      const v = await statusOf(key);
      return v.status === 'authorized' && v;
    });
    expect(done).toMatchObject({
      amountAuthorized: 1_000,
      amountCaptured: 0,
      providerPaymentId: view.providerPaymentId,
    });
    expect(done.nextAction).toBeUndefined();
    const creates = h.ledger().effects.filter((e) => e.operation === 'create' && e.reference === body.orderId);
    expect(creates).toEqual([expect.objectContaining({ payment_id: view.providerPaymentId, amount: 1_000 })]);

    // Now authorized, the same capture request goes through.
    const captured = await h.request('POST', `/v1/payments/${key}/capture`, { key: newKey(), body: {} });
    expect(captured.status).toBe(200);
    expect(captured.body).toMatchObject({ status: 'succeeded', amountCaptured: 1_000 });
  });

  it('the customer fails the authentication: declined authentication_failed, nothing charged', async () => {
    const { key, body, view, url } = await waitingPayment();
    expect(view.status).toBe('requires_action');
    expect(await customer(url, 'failed')).toBe(200);
    const declined = await eventually('declined by the webhook', async () => {
      const v = await statusOf(key);
      return v.status === 'declined' && v;
    });
    expect(declined).toMatchObject({ declineCode: 'authentication_failed', amountAuthorized: 0 });
    expect(h.ledger().effects.filter((e) => e.reference === body.orderId)).toEqual([]);
  });
});
