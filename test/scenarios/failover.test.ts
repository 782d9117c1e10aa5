/**
 * Failover (issue 12 item 4): a charge may name `fallbackProviders`; it moves to the next one only when every attempt at
 * the provider holding it provably never left (breaker open, connection refused), never after an unknown outcome, an
 * answer or a decline. Two real simulators serve as two providers (`simulator`, `backup`), each with its own activity
 * task queue and breaker key, plus `down`, a provider whose port refuses connections. Every claim about money is checked
 * in the simulators' ledgers.
 */
import { randomUUID } from 'node:crypto';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import pino from 'pino';
import { InMemoryCircuitBreaker } from '../../src/breaker';
import { providerIdempotencyKey } from '../../src/activities/keys';
import { chargeWorkflowId } from '../../src/domain/ids';
import type { PaymentView } from '../../src/domain/payment';
import { ProviderAttr } from '../../src/domain/search-attributes';
import { type RestProvider, createProvider, simulatorCapabilities } from '../../src/providers';
import { type Ledger, type RunningSimulator, startSimulator } from '../../src/simulator/server';
import { refusingProvider } from '../helpers/refusing-provider';
import { connectDevServer } from '../helpers/servers';
import { recordHistories } from '../helpers/workflows';
import { type ApiWorld, chargeBody, newKey, startWorld } from '../helpers/world';
import { eventually } from '../helpers/eventually';

let env: TestWorkflowEnvironment;
let h: ApiWorld;
let backupSim: RunningSimulator;
const backupApiKey = `sk_test_backup_${randomUUID()}`;
let backup: RestProvider;
let down: RestProvider;
const COOLDOWN_MS = 120_000;
// A real breaker: `simulator`'s is tripped by the last test only (a 2-minute open state outlives the file).
const breaker = new InMemoryCircuitBreaker({ failureThreshold: 3, cooldownMs: COOLDOWN_MS });

beforeAll(async () => {
  const logger = pino({ level: process.env.TEST_LOG_LEVEL ?? 'silent' });
  backupSim = await startSimulator({ port: 0 });
  await backupSim.setMerchant(backupApiKey, { idempotency: true });
  const adapter = (name: string, baseUrl: string, apiKey: string) =>
    createProvider(
      { name, baseUrl, apiKey, capabilities: simulatorCapabilities(), connectTimeoutMs: 500, totalTimeoutMs: 1_500 },
      logger,
    );
  backup = adapter('backup', backupSim.url, backupApiKey);
  down = await refusingProvider('down', logger);
  env = await connectDevServer();
  h = await startWorld(env, {
    api: true,
    extraProviders: { backup, down },
    breaker,
    // No webhooks: an unknown outcome must be settled by the reconcile's own lookup, not by a webhook.
    webhooks: false,
    timings: { reconcileScheduleMs: [1_000, 2_000, 4_000], settleWindowMs: 60_000 },
  });
}, 120_000);
afterAll(async () => {
  await h?.close();
  await backup?.close();
  await down?.close();
  await backupSim?.close();
  await env?.teardown();
});

const createsFor = (ledger: Ledger, orderId: string) =>
  ledger.effects.filter((e) => e.operation === 'create' && e.reference === orderId);
const primaryCreates = (orderId: string) => createsFor(h.ledger(), orderId);
const backupCreates = (orderId: string) => createsFor(backupSim.ledger(backupApiKey), orderId);
const backupRequests = (orderId: string) =>
  backupSim.ledger(backupApiKey).requests.filter((r) => r.reference === orderId);

const providerAttribute = async (key: string) =>
  (await env.client.workflow.getHandle(chargeWorkflowId(h.a.id, key)).describe()).typedSearchAttributes.get(
    ProviderAttr,
  );

const settled = (key: string, status: PaymentView['status']) =>
  eventually(
    `payment ${key} ${status}`,
    async () => {
      const res = await h.request('GET', `/v1/payments/${key}`);
      return res.body.status === status ? (res.body as unknown as PaymentView) : undefined;
    },
    30_000,
  );

describe('the request', () => {
  it('refuses an unknown fallback provider with 400 naming it, and starts nothing', async () => {
    const key = newKey();
    const res = await h.request('POST', '/v1/payments', {
      key,
      body: chargeBody({ fallbackProviders: ['backup', 'nowhere'] }),
    });
    expect(res.status).toBe(400);
    expect(res.body.error?.fields?.map((f) => f.path)).toEqual(['fallbackProviders.1']);
    await expect(env.client.workflow.getHandle(chargeWorkflowId(h.a.id, key)).describe()).rejects.toThrow();
  });

  it('refuses a provider named twice (or the primary again) with 400 naming the repeat', async () => {
    const twice = await h.request('POST', '/v1/payments', {
      key: newKey(),
      body: chargeBody({ provider: 'simulator', fallbackProviders: ['backup', 'backup'] }),
    });
    expect(twice.status).toBe(400);
    expect(twice.body.error?.fields?.map((f) => f.path)).toEqual(['fallbackProviders.1']);
    const primaryAgain = await h.request('POST', '/v1/payments', {
      key: newKey(),
      body: chargeBody({ provider: 'simulator', fallbackProviders: ['simulator'] }),
    });
    expect(primaryAgain.status).toBe(400);
    expect(primaryAgain.body.error?.fields?.map((f) => f.path)).toEqual(['fallbackProviders.0']);
  });

  it('counts the fallback list in the fingerprint: the same key with another list is 422', async () => {
    const key = newKey();
    const body = chargeBody({ fallbackProviders: ['backup'] });
    expect((await h.request('POST', '/v1/payments', { key, body })).status).toBe(200);

    const other = await h.request('POST', '/v1/payments', { key, body: { ...body, fallbackProviders: ['down'] } });

    expect(other.status).toBe(422);
    expect(other.body.error?.type).toBe('idempotency_key_reused');
  });
});

describe('no failover after anything that may have reached the provider', () => {
  it('a lost response at the primary (commit_then_drop) is reconciled there: one effect at the primary, none at the fallback', async () => {
    const key = newKey();
    const body = chargeBody({ fallbackProviders: ['backup'] });
    const orderId = body.orderId as string;
    // Every create attempt commits, then the connection drops: the outcome is unknown, never "not sent".
    h.sim.addFaults({
      rules: [{ match: { operation: 'create', reference: orderId }, fault: 'commit_then_drop', times: 10 }],
    });

    const answer = await h.request('POST', '/v1/payments', { key, body });

    expect(answer.status).toBe(202);
    expect(answer.body).toMatchObject({ status: 'unknown', provider: 'simulator' });
    const view = await settled(key, 'succeeded');
    expect(view.provider).toBe('simulator');
    expect(view.failovers).toBeUndefined();
    expect(primaryCreates(orderId)).toHaveLength(1);
    expect(backupRequests(orderId)).toHaveLength(0);
    // The reconcile found it at the primary (its lookup), under the primary's own key.
    const history = await env.client.workflow.getHandle(chargeWorkflowId(h.a.id, key)).fetchHistory();
    const children = (history.events ?? []).flatMap((e) => {
      const id = e.startChildWorkflowExecutionInitiatedEventAttributes?.workflowId;
      return id ? [id] : [];
    });
    expect(children).toEqual([`reconcile:${h.a.id}:create:${key}`]);
    expect(await providerAttribute(key)).toBe('simulator');
  });

  it('a decline at the primary is the answer: no failover', async () => {
    const key = newKey();
    const body = chargeBody({ paymentMethod: 'pm_decline_insufficient_funds', fallbackProviders: ['backup'] });

    const answer = await h.request('POST', '/v1/payments', { key, body });

    expect(answer.status).toBe(200);
    expect(answer.body).toMatchObject({ status: 'declined', declineCode: 'insufficient_funds', provider: 'simulator' });
    expect(answer.body.failovers).toBeUndefined();
    expect(backupRequests(body.orderId as string)).toHaveLength(0);
    expect(await providerAttribute(key)).toBe('simulator');
  });
});

describe('failover when the primary provably never saw the charge', () => {
  it('a primary refusing connections: the charge is authorized at the fallback under its own key; capture goes there too', async () => {
    const key = newKey();
    const body = chargeBody({ provider: 'down', fallbackProviders: ['backup'], capture: 'manual' });
    const orderId = body.orderId as string;

    const answer = await h.request('POST', '/v1/payments', { key, body });

    expect(answer.status).toBe(200);
    const view = answer.body as unknown as PaymentView;
    expect(view).toMatchObject({ status: 'authorized', provider: 'backup', amountAuthorized: 1_000 });
    expect(view.failovers).toEqual([{ from: 'down', to: 'backup', reason: 'connect_refused', at: expect.any(String) }]);
    const creates = backupCreates(orderId);
    expect(creates).toHaveLength(1);
    expect(primaryCreates(orderId)).toHaveLength(0);
    // The key sent to the fallback is scoped to it: not the key the first provider would have been sent.
    expect(creates[0]?.idempotency_key).toBe(providerIdempotencyKey(h.a.id, 'create', key, 'backup'));
    expect(creates[0]?.idempotency_key).not.toBe(providerIdempotencyKey(h.a.id, 'create', key));
    expect(await providerAttribute(key)).toBe('backup');

    const capture = await h.request('POST', `/v1/payments/${key}/capture`, { key: newKey(), body: {} });

    expect(capture.status).toBe(200);
    expect(capture.body).toMatchObject({ status: 'succeeded', amountCaptured: 1_000, provider: 'backup' });
    const captures = backupSim
      .ledger(backupApiKey)
      .effects.filter((e) => e.operation === 'capture' && e.payment_id === view.providerPaymentId);
    expect(captures).toHaveLength(1);
    // Replayed by test/workflows/replay.test.ts: a failover, then a capture at the fallback.
    await recordHistories({ env }, 'charge-failover-capture', [chargeWorkflowId(h.a.id, key)]);
  });

  it('after a failover, a lost response at the fallback is reconciled at the fallback, by the key scoped to it', async () => {
    const key = newKey();
    const body = chargeBody({ provider: 'down', fallbackProviders: ['backup'] });
    const orderId = body.orderId as string;
    backupSim.addFaults({
      rules: [{ match: { operation: 'create', reference: orderId }, fault: 'commit_then_drop', times: 10 }],
    });

    const answer = await h.request('POST', '/v1/payments', { key, body });

    expect(answer.status).toBe(202);
    expect(answer.body).toMatchObject({ status: 'unknown', provider: 'backup' });
    const view = await settled(key, 'succeeded');
    expect(view).toMatchObject({ provider: 'backup', amountCaptured: 1_000 });
    expect(view.failovers?.map((f) => [f.from, f.to])).toEqual([['down', 'backup']]);
    expect(backupCreates(orderId)).toHaveLength(1);
    expect(primaryCreates(orderId)).toHaveLength(0);
    // Found by the reconcile's lookup at the fallback (no webhooks here), not by a second charge anywhere.
    const lookups = backupSim
      .ledger(backupApiKey)
      .requests.filter((r) => r.operation === 'lookup' && r.idempotency_key !== null);
    expect(lookups.map((r) => r.idempotency_key)).toContain(providerIdempotencyKey(h.a.id, 'create', key, 'backup'));
  });

  // Last in the file: it leaves `simulator`'s breaker open for two minutes.
  it('an open breaker at the primary: the charge succeeds at the fallback with exactly one create effect in total', async () => {
    for (let i = 0; i < 3; i += 1) breaker.record('simulator', 'NotSent');
    expect(breaker.state('simulator').kind).toBe('open');
    const key = newKey();
    const body = chargeBody({ fallbackProviders: ['backup'] });
    const orderId = body.orderId as string;

    const answer = await h.request('POST', '/v1/payments', { key, body });

    expect(answer.status).toBe(200);
    expect(answer.body).toMatchObject({ status: 'succeeded', provider: 'backup', amountCaptured: 1_000 });
    expect(answer.body.failovers).toEqual([
      { from: 'simulator', to: 'backup', reason: 'breaker_open', at: expect.any(String) },
    ]);
    expect(primaryCreates(orderId).length + backupCreates(orderId).length).toBe(1);
    expect(backupCreates(orderId)).toHaveLength(1);
    expect(h.ledger().requests.filter((r) => r.reference === orderId)).toHaveLength(0);
    expect(await providerAttribute(key)).toBe('backup');
  });
});
