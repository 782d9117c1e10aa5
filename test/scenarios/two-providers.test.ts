/**
 * Two providers at once (issue 12 item 4, without failover): the simulator and Stripe (the Stripe adapter over
 * stripe-mock), each with its own activity task queue and worker (createWorkers builds one per provider) and its own
 * breaker key. A payment names its provider; one names `stripe`, another `simulator`, both go through, each only at
 * its own provider.
 *
 * stripe-mock is stateless: its PaymentIntent fixture is set to `succeeded` here, so every Stripe create answers a
 * captured payment with the amount we sent reflected; what the mock cannot do (hold a payment) is not asserted.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import pino from 'pino';
import { type RunningStripeMock, resolveStripeMock, startStripeMock } from '../../scripts/lib/stripe-mock';
import { chargeWorkflowId, providerTaskQueue } from '../../src/domain/ids';
import { StripeProvider } from '../../src/providers/stripe';
import { connectDevServer } from '../helpers/servers';
import { type ApiWorld, chargeBody, newKey, startWorld } from '../helpers/world';

let env: TestWorkflowEnvironment;
let h: ApiWorld;
let mock: RunningStripeMock;
let stripe: StripeProvider;

beforeAll(async () => {
  const binary = await resolveStripeMock();
  const fixtures = JSON.parse(readFileSync(binary.fixtures, 'utf8')) as {
    resources: Record<string, Record<string, unknown>>;
  };
  fixtures.resources.payment_intent = {
    ...fixtures.resources.payment_intent,
    status: 'succeeded',
    amount_received: 1_000,
  };
  const file = path.join(mkdtempSync(path.join(tmpdir(), 'stripe-mock-')), 'fixtures.json');
  writeFileSync(file, JSON.stringify(fixtures));
  mock = await startStripeMock(binary.path, { fixtures: file });
  stripe = new StripeProvider({
    secretKey: 'sk_test_twoProviders',
    apiBase: mock.url,
    connectTimeoutMs: 500,
    totalTimeoutMs: 1_500,
    logger: pino({ level: process.env.TEST_LOG_LEVEL ?? 'silent' }),
  });
  env = await connectDevServer();
  h = await startWorld(env, { api: true, extraProviders: { stripe } });
}, 120_000);
afterAll(async () => {
  await h?.close();
  await stripe?.close();
  await mock?.close();
  await env?.teardown();
});

const activityQueues = async (workflowId: string): Promise<string[]> => {
  const history = await env.client.workflow.getHandle(workflowId).fetchHistory();
  return (history.events ?? []).flatMap((e) => {
    const q = e.activityTaskScheduledEventAttributes?.taskQueue?.name;
    return q ? [q] : [];
  });
};

it('a payment naming stripe and one naming simulator both succeed, each on its own provider queue and provider', async () => {
  const stripeKey = newKey();
  const simKey = newKey();
  const [atStripe, atSim] = await Promise.all([
    h.request('POST', '/v1/payments', { key: stripeKey, body: chargeBody({ provider: 'stripe' }) }),
    h.request('POST', '/v1/payments', { key: simKey, body: chargeBody({ provider: 'simulator' }) }),
  ]);
  expect(atStripe.status).toBe(200);
  expect(atStripe.body).toMatchObject({ status: 'succeeded', provider: 'stripe', amountCaptured: 1_000 });
  expect(String(atStripe.body.providerPaymentId)).toMatch(/^pi_/);
  expect(atSim.status).toBe(200);
  expect(atSim.body).toMatchObject({ status: 'succeeded', provider: 'simulator', amountCaptured: 1_000 });

  // Each payment's provider call ran as its local first attempt (shape 3: no queue) or on its own provider's activity
  // task queue (the bulkhead), never on the other's.
  expect([[], [providerTaskQueue(h.taskQueue, 'stripe')]]).toContainEqual(
    await activityQueues(chargeWorkflowId(h.a.id, stripeKey)),
  );
  expect([[], [providerTaskQueue(h.taskQueue, 'simulator')]]).toContainEqual(
    await activityQueues(chargeWorkflowId(h.a.id, simKey)),
  );
  // The simulator saw exactly one create: the simulator payment's, never the Stripe one.
  const creates = (await h.ledger()).effects.filter((e) => e.operation === 'create');
  expect(creates).toHaveLength(1);
});
