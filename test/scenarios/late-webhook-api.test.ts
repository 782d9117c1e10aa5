/**
 * A payment whose create was never found goes to `needs_review`; a provider webhook that arrives later, naming this
 * payment in its metadata, settles it without an operator. Real API, client, workers and simulator (its webhooks
 * pointed at the API) on the run's shared dev server; the reconcile checks every second, so review comes in seconds.
 */
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { chargeWorkflowId } from '../../src/domain/ids';
import type { PaymentView } from '../../src/domain/payment';
import { PaymentStatusAttr } from '../../src/domain/search-attributes';
import { connectDevServer } from '../helpers/servers';
import { type ApiWorld, chargeBody, newKey, startWorld } from '../helpers/world';
import { eventually } from '../helpers/eventually';

let env: TestWorkflowEnvironment;
let h: ApiWorld;

beforeAll(async () => {
  env = await connectDevServer();
  h = await startWorld(env, { api: true, timings: { reconcileScheduleMs: [1_000, 1_000], settleWindowMs: 600_000 } });
}, 60_000);

afterAll(async () => {
  await h?.close();
  await env?.teardown();
});

const viewOf = async (key: string) => (await h.request('GET', `/v1/payments/${key}`)).body as unknown as PaymentView;

it('a late payment.succeeded webhook with this payment’s metadata settles a payment in needs_review', async () => {
  const key = newKey();
  const body = chargeBody();
  const orderId = body.orderId as string;
  // Every create of this order is reset after it was sent: unknown, then never found by the reconcile.
  h.sim.addFaults({ rules: [{ match: { operation: 'create', reference: orderId }, fault: 'reset_before_commit' }] });
  const first = await h.request('POST', '/v1/payments', { key, body });
  expect(first.status).toBe(202);
  const review = await eventually(
    'needs_review',
    async () => {
      const v = await viewOf(key);
      return v.status === 'needs_review' && v;
    },
    30_000,
  );
  expect(review.review?.reason).toMatch(/^create not found at simulator after 2 checks/);
  expect(review.providerPaymentId).toBeUndefined();
  expect(h.ledger().effects.filter((e) => e.reference === orderId)).toEqual([]);
  const deliveriesBefore = h.sim.webhookDeliveries().length;

  // The provider processed the charge after all (here: made at the provider under this payment's metadata); its
  // payment.succeeded webhook goes through the API's webhook route to the payment.
  h.sim.clearFaults();
  const res = await fetch(`${h.sim.url}/v1/payments`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${h.apiKey}`,
      'content-type': 'application/json',
      'idempotency-key': `late_${key}`,
    },
    body: JSON.stringify({
      amount: 1_000,
      currency: 'EUR',
      reference: orderId,
      payment_method: 'pm_card_visa',
      capture: 'automatic',
      metadata: { merchant_id: h.a.id, payment_key: key },
    }),
  });
  expect(res.status).toBe(200);
  const provider = (await res.json()) as { id: string };
  await h.sim.flushWebhooks();
  const delivered = h.sim.webhookDeliveries().slice(deliveriesBefore);
  expect(delivered.map((d) => [d.type, d.status])).toEqual([['payment.succeeded', 200]]);

  const settled = await eventually('the payment settled', async () => {
    const v = await viewOf(key);
    return v.status !== 'needs_review' && v;
  });
  expect(settled).toMatchObject({
    status: 'succeeded',
    providerPaymentId: provider.id,
    amountAuthorized: 1_000,
    amountCaptured: 1_000,
  });
  expect(settled.review).toBeUndefined();
  expect(settled.unknownSince).toBeUndefined();
  const handle = env.client.workflow.getHandle(chargeWorkflowId(h.a.id, key));
  expect((await handle.describe()).typedSearchAttributes.get(PaymentStatusAttr)).toBe('succeeded');
  // No operator was involved: the webhook alone settled it.
  const events = (await handle.fetchHistory()).events ?? [];
  const updates = events.flatMap((e) => {
    const name = e.workflowExecutionUpdateAcceptedEventAttributes?.acceptedRequest?.input?.name;
    return name ? [name] : [];
  });
  expect(updates).toEqual(['accept']);
  expect(events.filter((e) => e.workflowExecutionSignaledEventAttributes?.signalName === 'providerEvent')).toHaveLength(
    1,
  );
});
