/**
 * The whole stack over the Stripe adapter (issue 12 acceptance): the real HTTP API, PaymentsClient, workflows and
 * sweep on the run's dev server, a real worker serving the `stripe` provider on its own activity task queue, its
 * adapter built from the configuration (`STRIPE_SECRET_KEY`, `STRIPE_API_BASE`, `STRIPE_WEBHOOK_SECRET` through
 * `loadConfig` and `createConfiguredProviders`, as the worker's main does), and the same flows against the simulator.
 *
 * What is real and what is not:
 * - Real: every request the adapter sends (the official `stripe` SDK over our transport) reaches stripe-mock, Stripe's
 *   official mock, which validates it against Stripe's OpenAPI spec in the API version the SDK pins
 *   (`-strict-version-check`) and answers a PaymentIntent / Refund / list in Stripe's real shape. A local front on
 *   127.0.0.1 (test/helpers/stripe-front.ts) sits between: it records what the adapter sent (Idempotency-Key, form
 *   body, metadata), which the tests assert.
 * - Canned: stripe-mock is stateless and answers from fixtures, reflecting only request fields of the same name
 *   (amount, currency, capture_method, the id in the path, a refund's payment_intent; never metadata). So the front
 *   (test/helpers/stripe-states.ts) routes each request to one of several stripe-mocks whose PaymentIntent fixture has the status Stripe would show at
 *   that step (`requires_capture` after a manual create, `succeeded` after a capture, a charge with `amount_refunded`
 *   after a refund), and the money facts the mock does not reflect come from those fixtures: amount_received 1500 (the
 *   captured amount), amount_refunded 500, a captured PaymentIntent's amount 2000. The sweep's list answer is a fixture
 *   written for each sweep (its metadata is what the adapter sent for the charge, since the mock keeps none).
 * - Recorded: what stripe-mock cannot do (it never declines and never fails) is answered by the front with Stripe's
 *   recorded error bodies from test/providers/fixtures/stripe/: `card-declined` (402 card_error, insufficient_funds)
 *   for Stripe's own declining test PaymentMethod `pm_card_chargeDeclinedInsufficientFunds` (as Stripe test mode
 *   answers it), and `api-error-500` for the creates of the payment whose outcome the webhook test makes unknown.
 * - The webhook is built by the test (a stripe-mock PaymentIntent carrying the metadata the adapter sent) and signed
 *   with Stripe's own `webhooks.generateTestHeaderString`; the API verifies it with `constructEvent`.
 */
import { randomUUID } from 'node:crypto';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { providerIdempotencyKey } from '../../src/activities/keys';
import { captureWorkflowId, chargeWorkflowId, providerTaskQueue, refundWorkflowId } from '../../src/domain/ids';
import { reviewItemWorkflowId } from '../../src/domain/review-items';
import type { SweepResult } from '../../src/domain/sweep';
import { type ApiResponse, type StripeWorld, chargeBody, newKey, startWorld } from '../helpers/world';
import { eventually } from '../helpers/eventually';
import { connectDevServer } from '../helpers/servers';
import {
  type ConfiguredStripe,
  type StripeStates,
  metadataSent,
  newStripeWebhookSecret,
  stripeSignature,
} from '../helpers/stripe-states';
import { runSweepAt } from '../helpers/sweeps';
import { terminateAll } from '../helpers/terminate';

const STRIPE_WEBHOOK_SECRET = newStripeWebhookSecret();
const DECLINING_TEST_CARD = 'pm_card_chargeDeclinedInsufficientFunds';
// The amounts the fixtures are written for (stripe-mock reflects the amount we send, not what was captured/refunded).
const AUTHORIZED = 2_000;
const CAPTURED = 1_500;
const REFUNDED = 500;

let env: TestWorkflowEnvironment;
let h: StripeWorld;
/** The stripe-mocks, one per state, and the front routing each request to the one showing the state Stripe would be in. */
let states: StripeStates;
let configured: ConfiguredStripe;

beforeAll(async () => {
  env = await connectDevServer();
  h = await startWorld(env, {
    api: true,
    stripeMock: {
      name: 'stripe-workflows',
      authorized: AUTHORIZED,
      captured: CAPTURED,
      refunded: REFUNDED,
      decliningCard: DECLINING_TEST_CARD,
      webhookSecret: STRIPE_WEBHOOK_SECRET,
    },
    sweep: true,
  });
  ({ states, configured } = h.stripeMock);
  // The worker's configuration path: the adapter is what `createConfiguredProviders` builds from these variables.
  expect(configured.config.providers).toEqual(['simulator', 'stripe']);
}, 120_000);

afterAll(async () => {
  await h?.close();
  await env?.teardown();
});

/** The requests the adapter sent for one payment's create (by the metadata it carries). */
const createsOf = (key: string) => states.createsOf(key);

const charge = (key: string, over: Record<string, unknown>) =>
  h.request('POST', '/v1/payments', {
    key,
    body: chargeBody({ amount: { value: AUTHORIZED, currency: 'EUR' }, ...over }),
  });

const activityQueues = async (workflowId: string): Promise<string[]> => {
  const history = await env.client.workflow.getHandle(workflowId).fetchHistory();
  return (history.events ?? []).flatMap((e) => {
    const q = e.activityTaskScheduledEventAttributes?.taskQueue?.name;
    return q ? [q] : [];
  });
};

describe.each(['simulator', 'stripe'] as const)('the API and the workflows, unchanged, over %s', (provider) => {
  it('a manual capture: authorized, then 1500 of 2000 captured, then 500 of it refunded (200 each)', async () => {
    const key = newKey();
    const created = await charge(key, { provider, capture: 'manual' });
    expect(created.status).toBe(200);
    expect(created.body).toMatchObject({
      status: 'authorized',
      provider,
      amountAuthorized: AUTHORIZED,
      amountCaptured: 0,
      amountRefunded: 0,
    });
    const paymentId = String(created.body.providerPaymentId);

    const captureKey = newKey();
    const captured = await h.request('POST', `/v1/payments/${key}/capture`, {
      key: captureKey,
      body: { amount: CAPTURED },
    });
    expect(captured.status).toBe(200);
    expect(captured.body).toMatchObject({ status: 'succeeded', amountCaptured: CAPTURED, amountRefunded: 0 });

    const refundKey = newKey();
    const refunded = await h.request('POST', `/v1/payments/${key}/refunds`, {
      key: refundKey,
      body: { amount: REFUNDED },
    });
    expect(refunded.status).toBe(200);
    expect(refunded.body).toMatchObject({
      status: 'succeeded',
      amountCaptured: CAPTURED,
      amountRefunded: REFUNDED,
      providerPaymentId: paymentId,
      operations: [
        { kind: 'capture', key: captureKey, amount: CAPTURED, state: 'succeeded' },
        { kind: 'refund', key: refundKey, amount: REFUNDED, state: 'succeeded' },
      ],
    });

    // The charge's create ran as its local first attempt (shape 3: a marker, no queue); the capture's and the refund's
    // provider calls ran on the provider's own activity task queue.
    const queue = providerTaskQueue(h.taskQueue, provider);
    expect(await activityQueues(chargeWorkflowId(h.a.id, key))).toEqual([]);
    expect(await activityQueues(captureWorkflowId(h.a.id, captureKey))).toEqual([queue]);
    expect(await activityQueues(refundWorkflowId(h.a.id, refundKey))).toEqual([queue]);

    if (provider === 'simulator') {
      const effects = (await h.ledger()).effects.filter((e) => e.payment_id === paymentId);
      expect(effects.map((e) => [e.operation, e.amount])).toEqual([
        ['create', AUTHORIZED],
        ['capture', CAPTURED],
        ['refund', REFUNDED],
      ]);
      return;
    }
    // What the Stripe adapter sent, as stripe-mock validated it: one request per write, each with its own derived
    // Idempotency-Key, the create with our metadata and manual capture, the capture and refund with their amounts.
    expect(paymentId).toMatch(/^pi_/);
    const [create, ...more] = createsOf(key);
    expect(more).toEqual([]);
    expect(create?.headers['idempotency-key']).toBe(providerIdempotencyKey(h.a.id, 'create', key));
    expect(Object.fromEntries(create?.form ?? [])).toMatchObject({
      amount: String(AUTHORIZED),
      currency: 'eur',
      capture_method: 'manual',
      confirm: 'true',
      'metadata[merchant_id]': h.a.id,
      'metadata[payment_key]': key,
      'metadata[reference]': String((created.body as { orderId: string }).orderId),
    });
    const captures = states.front.seen.filter((r) => r.path === `/v1/payment_intents/${paymentId}/capture`);
    expect(
      captures.map((r) => [r.headers['idempotency-key'], r.form.get('amount_to_capture'), r.answeredStatus]),
    ).toEqual([[providerIdempotencyKey(h.a.id, 'capture', captureKey), String(CAPTURED), 200]]);
    const refunds = states.front.seen.filter(
      (r) => r.path === '/v1/refunds' && r.form.get('payment_intent') === paymentId,
    );
    expect(refunds.map((r) => [r.headers['idempotency-key'], r.form.get('amount'), r.answeredStatus])).toEqual([
      [providerIdempotencyKey(h.a.id, 'refund', refundKey), String(REFUNDED), 200],
    ]);
  });
});

describe('Stripe through the whole stack', () => {
  it('a charge (automatic capture) is 200 succeeded, sent once with our key and metadata', async () => {
    const key = newKey();
    const res = await charge(key, { provider: 'stripe', amount: { value: CAPTURED, currency: 'EUR' } });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      status: 'succeeded',
      provider: 'stripe',
      amountCaptured: CAPTURED,
      amount: { value: CAPTURED, currency: 'EUR' },
    });
    const creates = createsOf(key);
    expect(creates).toHaveLength(1);
    expect(creates[0]?.headers['idempotency-key']).toBe(providerIdempotencyKey(h.a.id, 'create', key));
    expect(creates[0]?.form.get('capture_method')).toBe('automatic');
    expect(creates[0]?.form.get('metadata[merchant_id]')).toBe(h.a.id);
  });

  it('a decline (Stripe’s recorded 402 card_error) is 200 declined with the decline code, sent once, never retried', async () => {
    const key = newKey();
    const res = await charge(key, { provider: 'stripe', paymentMethod: DECLINING_TEST_CARD });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ status: 'declined', provider: 'stripe', declineCode: 'insufficient_funds' });
    expect(res.body.providerPaymentId).toBeUndefined();
    const creates = createsOf(key);
    expect(creates.map((r) => [r.headers['idempotency-key'], r.answeredStatus])).toEqual([
      [providerIdempotencyKey(h.a.id, 'create', key), 402],
    ]);
    // A declined payment moves no money: a capture of it is refused before anything is sent to Stripe.
    const sentBefore = states.front.seen.length;
    const capture = await h.request('POST', `/v1/payments/${key}/capture`, { key: newKey(), body: {} });
    expect(capture.status).toBe(409);
    expect(states.front.seen.slice(sentBefore)).toEqual([]);
  });

  it('a webhook signed with Stripe’s test helper reaches the payment (unknown -> succeeded); a bad signature is 400 and changes nothing', async () => {
    const key = newKey();
    states.failingCreates.add(key);
    const started = await charge(key, { provider: 'stripe', amount: { value: CAPTURED, currency: 'EUR' } });
    expect(started.status).toBe(202);
    // Every create the adapter sent got Stripe's recorded 500 (api_error): an unknown outcome, never a failure; any
    // resend carries the same key. The payment is unknown.
    const unknown = await eventually(
      'the payment to be unknown',
      async () => {
        const r = await h.request('GET', `/v1/payments/${key}`);
        return r.body.status === 'unknown' && r;
      },
      20_000,
    );
    expect(unknown.body.providerPaymentId).toBeUndefined();
    const creates = createsOf(key);
    expect(creates.length).toBeGreaterThanOrEqual(1);
    expect(new Set(creates.map((r) => r.headers['idempotency-key']))).toEqual(
      new Set([providerIdempotencyKey(h.a.id, 'create', key)]),
    );
    expect(new Set(creates.map((r) => r.answeredStatus))).toEqual(new Set([500]));

    // The PaymentIntent as stripe-mock serves it (succeeded fixture), with what Stripe would hold from our create:
    // the amount and the metadata the adapter sent (stripe-mock keeps neither).
    const piId = `pi_${randomUUID().replace(/-/g, '').slice(0, 24)}`;
    const sentMetadata = metadataSent(creates[0]);
    expect(sentMetadata).toMatchObject({ merchant_id: h.a.id, payment_key: key });
    const body = await states.succeededEvent(piId, sentMetadata, CAPTURED);
    const post = (signature: string) =>
      h.request('POST', '/webhooks/stripe', { token: null, rawBody: body, headers: { 'stripe-signature': signature } });

    const forged = await post(stripeSignature(body, 'whsec_not_ours'));
    expect(forged.status).toBe(400);
    expect(forged.body.error?.type).toBe('invalid_signature');
    const still: ApiResponse = await h.request('GET', `/v1/payments/${key}`);
    expect(still.body).toMatchObject({ status: 'unknown' });
    expect(still.body.providerPaymentId).toBeUndefined();

    const signed = await post(stripeSignature(body, STRIPE_WEBHOOK_SECRET));
    expect(signed.status).toBe(200);
    expect(signed.body).toEqual({ received: true, delivery: 'payment' });
    const settled = await eventually('the webhook to settle the payment', async () => {
      const r = await h.request('GET', `/v1/payments/${key}`);
      return r.body.status === 'succeeded' && r;
    });
    expect(settled.body).toMatchObject({ providerPaymentId: piId, amountCaptured: CAPTURED, provider: 'stripe' });
    // Settled by the webhook alone: no further create was sent.
    expect(createsOf(key)).toHaveLength(creates.length);
  });

  /** One sweep run over Stripe, its list answered by a stripe-mock whose PaymentIntent fixture is `intent`. */
  async function sweepStripeListing(intent: Record<string, unknown>): Promise<SweepResult> {
    return states.listing(intent, async () => {
      const now = Date.now();
      const isList = (r: { method: string; path: string }) => r.method === 'GET' && r.path === '/v1/payment_intents';
      const listsBefore = states.front.seen.filter(isList).length;
      const result = await runSweepAt(env.client, {
        taskQueue: h.taskQueue,
        providers: ['stripe'],
        now,
        idPrefix: 'sweep-stripe-test',
      });
      const lists = states.front.seen.filter(isList).slice(listsBefore);
      // The adapter's list request, as stripe-mock validated it: the window in Stripe's created filter.
      expect(lists).toHaveLength(1);
      expect(lists[0]?.answeredStatus).toBe(200);
      expect(lists[0]?.query.get('created[gte]')).toBe(String(Math.floor((now - 60_000) / 1000)));
      expect(lists[0]?.query.get('created[lt]')).toBe(String(Math.floor((now + 2_000) / 1000)));
      return result;
    });
  }

  it('the sweep runs over Stripe: a PaymentIntent that is our payment agrees; a second one naming it is an orphan for review', async () => {
    const key = newKey();
    const res = await charge(key, { provider: 'stripe', amount: { value: CAPTURED, currency: 'EUR' } });
    expect(res.status).toBe(200);
    const paymentId = String(res.body.providerPaymentId);
    const metadata = metadataSent(createsOf(key)[0]);
    const ours = {
      status: 'succeeded',
      amount: CAPTURED,
      amount_received: CAPTURED,
      currency: 'eur',
      created: Math.floor(Date.now() / 1000),
      metadata,
    };

    const agreeing = await sweepStripeListing({ ...ours, id: paymentId });
    expect(agreeing).toMatchObject({ providerPaymentsChecked: 1, orphans: 0, disagreements: 0, reviewItemsStarted: 0 });

    const secondId = `pi_second${randomUUID().replace(/-/g, '').slice(0, 16)}`;
    const second = await sweepStripeListing({ ...ours, id: secondId });
    const itemId = reviewItemWorkflowId('stripe', secondId);
    expect(second).toMatchObject({
      providerPaymentsChecked: 1,
      orphans: 1,
      reviewItemsStarted: 1,
      reviewItems: [itemId],
    });
    // The item is the merchant's to see through the API.
    await eventually(
      'the review item in GET /v1/review-items',
      async () => {
        const list = await h.request('GET', '/v1/review-items');
        const items = (list.body as { items?: { id: string }[] }).items ?? [];
        return items.some((i) => i.id === itemId);
      },
      20_000,
    );
    await terminateAll(env.client, [itemId]);
  });
});
