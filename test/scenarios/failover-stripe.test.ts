/**
 * Failover with Stripe as the fallback (issue 12 item 4), over the whole stack: the real API, PaymentsClient, workflows
 * and sweep on the run's dev server; `simulator` (the world's real simulator), `down` (a provider whose port refuses
 * connections) and `stripe` (the Stripe adapter built from the configuration, as the worker's main builds it), each on
 * its own activity task queue. Stripe is stripe-mock behind a recording front (test/helpers/stripe-states.ts; see
 * test/providers/stripe-workflows.test.ts for what is real, canned and recorded): the front records every request the
 * adapter sent, so "one create in total, under the key scoped to Stripe" is checked on the wire.
 *
 * Covered here, beside test/scenarios/failover.test.ts: the Stripe request after a failover (refused connection, open
 * breaker) and its capture; webhooks after a failover (the fallback's settles the payment, the first provider's
 * changes none of its money); the sweep after a failover (the fallback's payment is this payment, and a payment at the
 * first provider naming it is flagged, never taken for it).
 */
import { randomUUID } from 'node:crypto';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import pino from 'pino';
import { type CircuitBreaker, InMemoryCircuitBreaker } from '../../src/breaker';
import { providerIdempotencyKey } from '../../src/activities/keys';
import { chargeWorkflowId } from '../../src/domain/ids';
import type { PaymentView } from '../../src/domain/payment';
import { reviewItemWorkflowId } from '../../src/domain/review-items';
import { ProviderAttr } from '../../src/domain/search-attributes';
import type { SweepResult } from '../../src/domain/sweep';
import type { RestProvider } from '../../src/providers';
import { signWebhook } from '../../src/simulator/signature';
import { refusingProvider } from '../helpers/refusing-provider';
import { connectDevServer } from '../helpers/servers';
import { type StripeStates, metadataSent, newStripeWebhookSecret, stripeSignature } from '../helpers/stripe-states';
import { runSweepAt } from '../helpers/sweeps';
import { terminateAll } from '../helpers/terminate';
import { recordHistories } from '../helpers/workflows';
import { type StripeWorld, WEBHOOK_SECRET, chargeBody, newKey, startWorld } from '../helpers/world';
import { eventually } from '../helpers/eventually';

const STRIPE_WEBHOOK_SECRET = newStripeWebhookSecret();
// The amounts the stripe-mock fixtures are written for (stripe-mock reflects the amount we send, not what was captured).
const AUTHORIZED = 2_000;
const CAPTURED = 1_500;

let env: TestWorkflowEnvironment;
let h: StripeWorld;
let states: StripeStates;
let down: RestProvider;

/**
 * A real breaker per test: each test starts with every provider's breaker closed, and the one that opens the
 * simulator's does it through the breaker's own counting (three NotSent records), as the activities would.
 */
let currentBreaker = new InMemoryCircuitBreaker({ failureThreshold: 3, cooldownMs: 120_000 });
const breaker: CircuitBreaker = {
  acquire: (provider) => currentBreaker.acquire(provider),
  record: (provider, outcome, report) => currentBreaker.record(provider, outcome, report),
};
beforeEach(() => {
  currentBreaker = new InMemoryCircuitBreaker({ failureThreshold: 3, cooldownMs: 120_000 });
});
const openSimulatorBreaker = () => {
  for (let i = 0; i < 3; i += 1) currentBreaker.record('simulator', 'NotSent');
  expect(currentBreaker.state('simulator').kind).toBe('open');
};

beforeAll(async () => {
  const logger = pino({ level: process.env.TEST_LOG_LEVEL ?? 'silent' });
  down = await refusingProvider('down', logger);
  env = await connectDevServer();
  h = await startWorld(env, {
    api: true,
    stripeMock: {
      name: 'failover-stripe',
      authorized: AUTHORIZED,
      captured: CAPTURED,
      webhookSecret: STRIPE_WEBHOOK_SECRET,
    },
    extraProviders: { down },
    breaker,
    sweep: true,
    // The first reconcile check is a minute away: an unknown payment here is settled by a webhook, or stays unknown.
    timings: { reconcileScheduleMs: [60_000, 120_000] },
  });
  ({ states } = h.stripeMock);
}, 120_000);

afterAll(async () => {
  await h?.close();
  await down?.close();
  await env?.teardown();
});

/** The creates the adapter sent to Stripe for one payment (found by the metadata it carries). */
const stripeCreatesOf = (key: string) => states.createsOf(key);
const simulatorRequestsOf = (orderId: string) => h.ledger().requests.filter((r) => r.reference === orderId);
const stripeKey = (key: string) => providerIdempotencyKey(h.a.id, 'create', key, 'stripe');

const providerAttribute = async (key: string) =>
  (await env.client.workflow.getHandle(chargeWorkflowId(h.a.id, key)).describe()).typedSearchAttributes.get(
    ProviderAttr,
  );
const viewOf = async (key: string) => (await h.request('GET', `/v1/payments/${key}`)).body as unknown as PaymentView;
const nowS = () => Math.floor(Date.now() / 1000);

/** A charge that fails over to Stripe, whose creates there all get Stripe's recorded 500: 202 unknown at Stripe. */
async function unknownAtStripe(key: string, over: Record<string, unknown>): Promise<PaymentView> {
  states.failingCreates.add(key);
  const answer = await h.request('POST', '/v1/payments', {
    key,
    body: chargeBody({ amount: { value: CAPTURED, currency: 'EUR' }, fallbackProviders: ['stripe'], ...over }),
  });
  expect(answer.status).toBe(202);
  const view = await eventually(
    'the payment unknown at stripe',
    async () => {
      const v = await viewOf(key);
      return v.status === 'unknown' && v;
    },
    20_000,
  );
  expect(view).toMatchObject({ provider: 'stripe' });
  expect(view.providerPaymentId).toBeUndefined();
  const creates = stripeCreatesOf(key);
  expect(creates.length).toBeGreaterThanOrEqual(1);
  // Every resend carried the one key scoped to Stripe; each got the 500.
  expect(new Set(creates.map((r) => r.headers['idempotency-key']))).toEqual(new Set([stripeKey(key)]));
  expect(new Set(creates.map((r) => r.answeredStatus))).toEqual(new Set([500]));
  return view;
}

/** A Stripe `payment_intent.succeeded` for the PaymentIntent `piId` carrying what the adapter sent on create. */
const stripeSucceededEvent = (piId: string, metadata: Record<string, string>): Promise<string> =>
  states.succeededEvent(piId, metadata, CAPTURED);

const postStripeWebhook = (body: string) =>
  h.request('POST', '/webhooks/stripe', {
    token: null,
    rawBody: body,
    headers: { 'stripe-signature': stripeSignature(body, STRIPE_WEBHOOK_SECRET) },
  });

const postSimulatorWebhook = (event: unknown) => {
  const raw = JSON.stringify(event);
  return h.request('POST', '/webhooks/simulator', {
    token: null,
    rawBody: raw,
    headers: { 'sim-signature': signWebhook(WEBHOOK_SECRET, raw, nowS()) },
  });
};

/** How many `providerEvent` signals the payment's workflow has processed (a workflow task completed after each). */
async function processedEvents(key: string): Promise<number> {
  const history = await env.client.workflow.getHandle(chargeWorkflowId(h.a.id, key)).fetchHistory();
  const events = history.events ?? [];
  const completed = events.flatMap((e, i) => (e.workflowTaskCompletedEventAttributes ? [i] : []));
  return events
    .slice(0, completed.at(-1) ?? 0)
    .filter((e) => e.workflowExecutionSignaledEventAttributes?.signalName === 'providerEvent').length;
}

describe('Stripe as the fallback', () => {
  it('a primary refusing connections: authorized at Stripe under the key scoped to Stripe, one create in total; the capture goes to Stripe', async () => {
    const key = newKey();
    const body = chargeBody({
      provider: 'down',
      fallbackProviders: ['stripe'],
      capture: 'manual',
      amount: { value: AUTHORIZED, currency: 'EUR' },
    });

    const answer = await h.request('POST', '/v1/payments', { key, body });

    expect(answer.status).toBe(200);
    const view = answer.body as unknown as PaymentView;
    expect(view).toMatchObject({ status: 'authorized', provider: 'stripe', amountAuthorized: AUTHORIZED });
    expect(view.failovers).toEqual([{ from: 'down', to: 'stripe', reason: 'connect_refused', at: expect.any(String) }]);
    expect(view.providerPaymentId).toMatch(/^pi_/);
    // `down` refused every connection (nothing can have reached it); Stripe got exactly one create, with its own key.
    const creates = stripeCreatesOf(key);
    expect(creates.map((r) => [r.headers['idempotency-key'], r.answeredStatus])).toEqual([[stripeKey(key), 200]]);
    expect(stripeKey(key)).not.toBe(providerIdempotencyKey(h.a.id, 'create', key));
    expect(metadataSent(creates[0])).toMatchObject({ merchant_id: h.a.id, payment_key: key });
    expect(creates[0]?.form.get('capture_method')).toBe('manual');
    expect(await providerAttribute(key)).toBe('stripe');

    const captureKey = newKey();
    const capture = await h.request('POST', `/v1/payments/${key}/capture`, {
      key: captureKey,
      body: { amount: CAPTURED },
    });

    expect(capture.status).toBe(200);
    expect(capture.body).toMatchObject({ status: 'succeeded', provider: 'stripe', amountCaptured: CAPTURED });
    const captures = states.front.seen.filter(
      (r) => r.path === `/v1/payment_intents/${view.providerPaymentId}/capture`,
    );
    expect(
      captures.map((r) => [r.headers['idempotency-key'], r.form.get('amount_to_capture'), r.answeredStatus]),
    ).toEqual([[providerIdempotencyKey(h.a.id, 'capture', captureKey), String(CAPTURED), 200]]);
    expect(stripeCreatesOf(key)).toHaveLength(1);
  });

  it('an open breaker at the primary (simulator): succeeds at Stripe, one create in total, nothing sent to the simulator', async () => {
    openSimulatorBreaker();
    const key = newKey();
    const body = chargeBody({ fallbackProviders: ['stripe'], amount: { value: CAPTURED, currency: 'EUR' } });

    const answer = await h.request('POST', '/v1/payments', { key, body });

    expect(answer.status).toBe(200);
    expect(answer.body).toMatchObject({ status: 'succeeded', provider: 'stripe', amountCaptured: CAPTURED });
    expect(answer.body.failovers).toEqual([
      { from: 'simulator', to: 'stripe', reason: 'breaker_open', at: expect.any(String) },
    ]);
    expect(simulatorRequestsOf(body.orderId as string)).toEqual([]);
    expect(stripeCreatesOf(key).map((r) => [r.headers['idempotency-key'], r.answeredStatus])).toEqual([
      [stripeKey(key), 200],
    ]);
    expect(await providerAttribute(key)).toBe('stripe');
  });
});

describe('webhooks after a failover', () => {
  it("the fallback's signed webhook reaches the payment: unknown at Stripe after a lost answer, settled by Stripe's event", async () => {
    const key = newKey();
    await unknownAtStripe(key, { provider: 'down' });
    const creates = stripeCreatesOf(key);
    const piId = `pi_${randomUUID().replace(/-/g, '').slice(0, 24)}`;

    const delivered = await postStripeWebhook(await stripeSucceededEvent(piId, metadataSent(creates[0])));

    expect(delivered.status).toBe(200);
    expect(delivered.body).toEqual({ received: true, delivery: 'payment' });
    const settled = await eventually('the webhook to settle the payment', async () => {
      const v = await viewOf(key);
      return v.status === 'succeeded' && v;
    });
    expect(settled).toMatchObject({ provider: 'stripe', providerPaymentId: piId, amountCaptured: CAPTURED });
    // Settled by the webhook alone: no further create, nothing at the simulator or at `down`.
    expect(stripeCreatesOf(key)).toHaveLength(creates.length);
  });

  it('a webhook from the provider that does not hold the payment (the first one) changes none of its money', async () => {
    openSimulatorBreaker();
    const key = newKey();
    const view = await unknownAtStripe(key, {});
    expect(view.failovers?.map((f) => [f.from, f.to, f.reason])).toEqual([['simulator', 'stripe', 'breaker_open']]);
    expect(simulatorRequestsOf(view.orderId)).toEqual([]);
    const before = await processedEvents(key);

    // Signed with the simulator's real secret and naming this payment by its metadata, as a stale or misdirected
    // event would: the simulator never saw this payment (its breaker was open), so it moved no money for it there.
    const stale = await postSimulatorWebhook({
      id: `evt_${randomUUID()}`,
      type: 'payment.succeeded',
      created: nowS(),
      data: {
        payment: {
          id: `pay_stale_${randomUUID()}`,
          status: 'succeeded',
          amount: CAPTURED,
          amount_captured: CAPTURED,
          amount_refunded: 0,
          currency: 'EUR',
          reference: view.orderId,
          created: nowS(),
          metadata: { merchant_id: h.a.id, payment_key: key },
        },
      },
    });

    expect(stale.status).toBe(200);
    await eventually('the payment to have processed the event', async () => (await processedEvents(key)) > before);
    const after = await viewOf(key);
    expect(after).toMatchObject({ status: 'unknown', provider: 'stripe', amountAuthorized: 0, amountCaptured: 0 });
    expect(after.providerPaymentId).toBeUndefined();

    // Stripe's own event still settles it, with Stripe's PaymentIntent.
    const piId = `pi_${randomUUID().replace(/-/g, '').slice(0, 24)}`;
    const delivered = await postStripeWebhook(await stripeSucceededEvent(piId, metadataSent(stripeCreatesOf(key)[0])));
    expect(delivered.status).toBe(200);
    const settled = await eventually('the Stripe webhook to settle the payment', async () => {
      const v = await viewOf(key);
      return v.status === 'succeeded' && v;
    });
    expect(settled).toMatchObject({ provider: 'stripe', providerPaymentId: piId, amountCaptured: CAPTURED });
    // Replayed by test/workflows/replay.test.ts: the failover and the `provider-events-from-holder` patch.
    await recordHistories({ env }, 'charge-failover-foreign-webhook', [chargeWorkflowId(h.a.id, key)]);
  });
});

describe('the sweep after a failover', () => {
  /** One sweep run over `providers` for the last minute; Stripe's list (if swept) is a stripe-mock listing `intent`. */
  async function sweep(providers: string[], intent?: Record<string, unknown>): Promise<SweepResult> {
    const run = () =>
      runSweepAt(env.client, { taskQueue: h.taskQueue, providers, now: Date.now(), idPrefix: 'sweep-failover-test' });
    return intent === undefined ? run() : states.listing(intent, run);
  }

  it("the fallback's payment is recognised as this payment (checked, agrees); nothing is expected at the first provider", async () => {
    openSimulatorBreaker();
    const key = newKey();
    const body = chargeBody({ fallbackProviders: ['stripe'], amount: { value: CAPTURED, currency: 'EUR' } });
    const answer = await h.request('POST', '/v1/payments', { key, body });
    expect(answer.body).toMatchObject({ status: 'succeeded', provider: 'stripe' });
    const listed = {
      id: String(answer.body.providerPaymentId),
      status: 'succeeded',
      amount: CAPTURED,
      amount_received: CAPTURED,
      currency: 'eur',
      created: nowS(),
      metadata: metadataSent(stripeCreatesOf(key)[0]),
    };
    // The simulator's list of the window: whatever this file's other tests left there, none of it this order's.
    const atSimulator = h.ledger().effects.filter((e) => e.operation === 'create').length;

    const result = await sweep(['simulator', 'stripe'], listed);

    expect(result).toMatchObject({
      providerPaymentsChecked: atSimulator + 1,
      orphans: 0,
      disagreements: 0,
      reviewItemsStarted: 0,
    });
    expect(simulatorRequestsOf(body.orderId as string)).toEqual([]);
    // The sweep's reads left the payment as it was.
    expect(await viewOf(key)).toMatchObject({ status: 'succeeded', provider: 'stripe' });
  });

  it('a payment at the first provider naming a payment that failed over is flagged for review, never taken for it', async () => {
    openSimulatorBreaker();
    const key = newKey();
    const view = await unknownAtStripe(key, {});
    // A charge at the simulator carrying this payment's metadata (say, a stray resend by another integration): money
    // moved at a provider that does not hold the payment. Our payment is still unknown at Stripe (reconciling there).
    const stray = await fetch(`${h.sim.url}/v1/payments`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${h.apiKey}`,
        'content-type': 'application/json',
        'idempotency-key': `stray_${randomUUID()}`,
      },
      body: JSON.stringify({
        amount: CAPTURED,
        currency: 'EUR',
        reference: view.orderId,
        payment_method: 'pm_card_visa',
        capture: 'automatic',
        metadata: { merchant_id: h.a.id, payment_key: key },
      }),
    });
    expect(stray.status).toBe(200);
    const strayId = ((await stray.json()) as { id: string }).id;

    const result = await sweep(['simulator']);

    const itemId = reviewItemWorkflowId('simulator', strayId);
    expect(result.reviewItems).toContain(itemId);
    expect(result.orphans).toBeGreaterThanOrEqual(1);
    // Our payment did not adopt it: still unknown at Stripe, nothing recorded.
    const after = await viewOf(key);
    expect(after).toMatchObject({ status: 'unknown', provider: 'stripe', amountCaptured: 0 });
    expect(after.providerPaymentId).toBeUndefined();
    await terminateAll(env.client, [itemId]);
  });
});
