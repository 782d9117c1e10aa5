import { randomUUID } from 'node:crypto';
import { ErrorType } from '../../src/domain/errors';
import { keyHash, type Logger } from '../../src/providers/logging';
import {
  createProvider,
  simulatorCapabilities,
  simulatorCapabilitiesWithoutKeys,
  type RestProvider,
} from '../../src/providers/rest/adapter';
import type { CallContext, CreatePaymentInput } from '../../src/providers/types';
import { startSimulator } from '../../src/simulator/server';
import { fixedHttpServer, memoryLogger, providerFailure, silentLogger, type TestServer } from './net-helpers';
import { eventually } from '../helpers/eventually';
import { refusedPort } from '../helpers/net';

// The REST adapter against the real simulator over 127.0.0.1: every row of the outcome classification produced by a
// real fault, and the ledger as the witness of what the provider actually did (and that the client sent once).

interface LedgerEntry {
  api_key: string;
  operation: string;
  idempotency_key: string | null;
  payment_id?: string;
  status?: number | null;
  fault?: string;
}
interface Ledger {
  effects: LedgerEntry[];
  requests: LedgerEntry[];
}

let sim: { url: string; close(): Promise<void> };
const providers: RestProvider[] = [];
const servers: TestServer[] = [];

beforeAll(async () => {
  sim = await startSimulator({ port: 0 });
});
afterAll(async () => {
  await sim.close();
});
afterEach(async () => {
  await control('DELETE', '/_sim/faults');
  await Promise.all(providers.splice(0).map((p) => p.close()));
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

/** The simulator's control API (src/simulator/control.ts), over HTTP like any other client of it. */
const control = async (method: string, path: string, body?: unknown): Promise<unknown> => {
  const res = await fetch(`${sim.url}${path}`, {
    method,
    headers: { 'content-type': 'application/json' },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`);
  return res.json();
};

type FaultRule = {
  match: { operation?: string; reference?: string; key?: string };
  fault: 'commit_then_drop' | 'reset_before_commit' | 'latency' | 'status';
  status?: number;
  retry_after_s?: number;
  latency_ms?: number;
  times?: number;
};
const fault = (rule: FaultRule) => control('POST', '/_sim/faults', { rules: [rule] });

/** The ledger of one merchant (every test has its own api key). */
const ledger = async (apiKey: string): Promise<Ledger> => {
  const all = (await control('GET', '/_sim/ledger')) as Ledger;
  return {
    effects: all.effects.filter((e) => e.api_key === apiKey),
    requests: all.requests.filter((r) => r.api_key === apiKey),
  };
};

const newMerchant = () => ({
  apiKey: `sk_test_${randomUUID()}`,
  key: `key_${randomUUID()}`,
  reference: `order_${randomUUID()}`,
});

const provider = (
  apiKey: string,
  options: { totalTimeoutMs?: number; logger?: Logger; baseUrl?: string; keys?: boolean } = {},
): RestProvider => {
  const p = createProvider({
    name: 'simulator',
    baseUrl: options.baseUrl ?? sim.url,
    apiKey,
    capabilities: options.keys === false ? simulatorCapabilitiesWithoutKeys() : simulatorCapabilities(),
    connectTimeoutMs: 500,
    totalTimeoutMs: options.totalTimeoutMs ?? 2000,
    logger: options.logger ?? silentLogger(),
  });
  providers.push(p);
  return p;
};

const charge = (reference: string, overrides: Partial<CreatePaymentInput> = {}): CreatePaymentInput => ({
  amount: 1250,
  currency: 'EUR',
  reference,
  paymentMethod: 'pm_card_visa',
  capture: 'automatic',
  ...overrides,
});
const ctx = (idempotencyKey: string, attempt = 1): CallContext => ({ idempotencyKey, attempt });

describe('answers', () => {
  it('metadata sent on create comes back on the payment, on lookups and in webhooks', async () => {
    const { apiKey, key, reference } = newMerchant();
    const p = provider(apiKey);
    const metadata = { merchant_id: 'm_1', payment_key: 'order-42-attempt-1' };
    const created = await p.createPayment(charge(reference, { metadata }), ctx(key));
    if (created.outcome === 'declined') throw new Error('unexpected decline');
    expect(created.payment.metadata).toEqual(metadata);
    expect((await p.getPayment(created.payment.id))?.metadata).toEqual(metadata);
    // Without metadata the field is absent, not empty: nothing invented.
    const plain = await p.createPayment(charge(`${reference}-2`), ctx(`${key}-2`));
    if (plain.outcome === 'declined') throw new Error('unexpected decline');
    expect(plain.payment.metadata).toBeUndefined();
  });

  it('2xx: a created payment, camelCase; the same key again is a replay of the same payment, one effect', async () => {
    const { apiKey, key, reference } = newMerchant();
    const p = provider(apiKey);
    const first = await p.createPayment(charge(reference), ctx(key));
    expect(first).toEqual({
      outcome: 'succeeded',
      replayed: false,
      payment: {
        id: expect.any(String),
        status: 'succeeded',
        amount: 1250,
        amountCaptured: 1250,
        amountRefunded: 0,
        currency: 'EUR',
        reference,
        created: expect.any(Number),
      },
    });
    const again = await p.createPayment(charge(reference), ctx(key, 2));
    expect(again).toEqual({ ...first, replayed: true });
    expect((await ledger(apiKey)).effects).toHaveLength(1);
  });

  it('manual capture: authorized, then capture, refund and void map to camelCase', async () => {
    const { apiKey, key, reference } = newMerchant();
    const p = provider(apiKey);
    const created = await p.createPayment(charge(reference, { capture: 'manual' }), ctx(key));
    expect(created.outcome).toBe('authorized');
    if (created.outcome === 'declined') return;
    const id = created.payment.id;
    const captured = await p.capturePayment(id, { amount: 1000 }, ctx(`${key}:capture`));
    expect(captured).toMatchObject({ id, status: 'succeeded', amount: 1250, amountCaptured: 1000 });
    const refund = await p.refundPayment(id, { amount: 300 }, ctx(`${key}:refund`));
    expect(refund).toEqual({
      id: expect.any(String),
      paymentId: id,
      amount: 300,
      status: 'succeeded',
      created: expect.any(Number),
    });
    expect(await p.getPayment(id)).toMatchObject({ amountCaptured: 1000, amountRefunded: 300 });

    const other = newMerchant();
    const auth = await p.createPayment(charge(other.reference, { capture: 'manual' }), ctx(other.key));
    if (auth.outcome === 'declined') throw new Error('declined');
    expect(await p.voidPayment(auth.payment.id, ctx(`${other.key}:void`))).toMatchObject({ status: 'voided' });
  });

  it('402 card_error: a decline value, not an error', async () => {
    const { apiKey, key, reference } = newMerchant();
    const result = await provider(apiKey).createPayment(
      charge(reference, { paymentMethod: 'pm_decline_insufficient_funds' }),
      ctx(key),
    );
    expect(result).toEqual({ outcome: 'declined', declineCode: 'insufficient_funds' });
    expect((await ledger(apiKey)).effects).toHaveLength(0);
  });

  it('400 over-capture: ProviderRejected with the code, nothing captured', async () => {
    const { apiKey, key, reference } = newMerchant();
    const p = provider(apiKey);
    const created = await p.createPayment(charge(reference, { capture: 'manual' }), ctx(key));
    if (created.outcome === 'declined') throw new Error('declined');
    const e = await providerFailure(p.capturePayment(created.payment.id, { amount: 5000 }, ctx(`${key}:capture`)));
    expect(e.type).toBe(ErrorType.ProviderRejected);
    expect(e.details).toMatchObject({ operation: 'capture', status: 400, code: 'amount_too_large', reason: 'status' });
    const l = await ledger(apiKey);
    expect(l.effects.map((x) => x.operation)).toEqual(['create']);
    expect(l.requests.map((x) => [x.operation, x.status])).toEqual([
      ['create', 200],
      ['capture', 400],
    ]);
  });

  it('400 over-refund: ProviderRejected', async () => {
    const { apiKey, key, reference } = newMerchant();
    const p = provider(apiKey);
    const created = await p.createPayment(charge(reference), ctx(key));
    if (created.outcome === 'declined') throw new Error('declined');
    const e = await providerFailure(p.refundPayment(created.payment.id, { amount: 99_999 }, ctx(`${key}:refund`)));
    expect(e.type).toBe(ErrorType.ProviderRejected);
    expect(e.details.status).toBe(400);
  });

  it('same key, changed amount: ProviderRejected idempotency_key_mismatch, one effect', async () => {
    const { apiKey, key, reference } = newMerchant();
    const p = provider(apiKey);
    await p.createPayment(charge(reference), ctx(key));
    const e = await providerFailure(p.createPayment(charge(reference, { amount: 9999 }), ctx(key, 2)));
    expect(e.type).toBe(ErrorType.ProviderRejected);
    expect(e.details).toMatchObject({ status: 422, code: 'idempotency_key_mismatch' });
    const l = await ledger(apiKey);
    expect(l.effects).toHaveLength(1);
    expect(l.requests.map((x) => x.status)).toEqual([200, 422]);
  });

  it('an unparseable 2xx is OutcomeUnknown (a raw server answering 200)', async () => {
    for (const body of ['not json', '{}']) {
      const server = await fixedHttpServer(200, body);
      servers.push(server);
      const { apiKey, key, reference } = newMerchant();
      const e = await providerFailure(
        provider(apiKey, { baseUrl: server.url }).createPayment(charge(reference), ctx(key)),
      );
      expect(e.type).toBe(ErrorType.OutcomeUnknown);
      expect(e.details).toMatchObject({ status: 200, reason: 'unparseable' });
      expect(server.requests()).toBe(1);
    }
  });

  it('sends snake_case with Idempotency-Key, Request-Id and Authorization', async () => {
    const server = await fixedHttpServer(402, JSON.stringify({ error: { type: 'card_error', code: 'card_declined' } }));
    servers.push(server);
    const { apiKey, key, reference } = newMerchant();
    await provider(apiKey, { baseUrl: server.url }).createPayment(charge(reference), {
      idempotencyKey: key,
      attempt: 3,
      requestId: 'req_abc',
    });
    const [sent] = server.received();
    expect(sent?.url).toBe('/v1/payments');
    expect(sent?.headers).toMatchObject({
      'idempotency-key': key,
      'request-id': 'req_abc',
      authorization: `Bearer ${apiKey}`,
      'content-type': 'application/json',
    });
    expect(JSON.parse(sent?.body ?? '')).toEqual({
      amount: 1250,
      currency: 'EUR',
      reference,
      payment_method: 'pm_card_visa',
      capture: 'automatic',
    });
  });
});

describe('failures, each from a real simulator fault; the client never sends twice', () => {
  it('connection refused: NotSent, nothing reached the provider', async () => {
    const { apiKey, key, reference } = newMerchant();
    const port = await refusedPort();
    const p = provider(apiKey, { baseUrl: `http://127.0.0.1:${port}` });
    const e = await providerFailure(p.createPayment(charge(reference), ctx(key)));
    expect(e.details).toEqual({ type: ErrorType.NotSent, operation: 'create', reason: 'connect_refused' });
  });

  it('reset_before_commit: the client sees a reset after send, so OutcomeUnknown (it cannot know nothing was committed)', async () => {
    const { apiKey, key, reference } = newMerchant();
    await fault({ match: { key }, fault: 'reset_before_commit', times: 1 });
    const e = await providerFailure(provider(apiKey).createPayment(charge(reference), ctx(key)));
    // The simulator committed nothing, but from the client's side the request was written and the connection reset:
    // exactly the situation where the provider may have acted. Only a lookup can tell, so the class must be unknown.
    expect(e.type).toBe(ErrorType.OutcomeUnknown);
    expect(e.details.reason).toBe('reset_after_send');
    const l = await ledger(apiKey);
    expect(l.effects).toHaveLength(0);
    expect(l.requests).toHaveLength(1);
  });

  it('commit_then_drop: OutcomeUnknown, exactly one effect, and findByIdempotencyKey finds the payment', async () => {
    const { apiKey, key, reference } = newMerchant();
    await fault({ match: { key }, fault: 'commit_then_drop', times: 1 });
    const p = provider(apiKey);
    const e = await providerFailure(p.createPayment(charge(reference), ctx(key)));
    expect(e.type).toBe(ErrorType.OutcomeUnknown);
    expect(e.details.reason).toBe('reset_after_send');
    const l = await ledger(apiKey);
    expect(l.requests).toHaveLength(1);
    expect(l.effects).toHaveLength(1);
    const found = await p.findByIdempotencyKey(key);
    expect(found).toMatchObject({ id: l.effects[0]?.payment_id, status: 'succeeded', amount: 1250, reference });
    expect(await p.findByReference(reference)).toEqual([found]);
  });

  it('latency beyond the total timeout: OutcomeUnknown timeout_after_send; the effect lands after we gave up', async () => {
    const { apiKey, key, reference } = newMerchant();
    await fault({ match: { key }, fault: 'latency', latency_ms: 500, times: 1 });
    const p = provider(apiKey, { totalTimeoutMs: 150 });
    const e = await providerFailure(p.createPayment(charge(reference), ctx(key)));
    expect(e.type).toBe(ErrorType.OutcomeUnknown);
    expect(e.details.reason).toBe('timeout_after_send');
    expect((await ledger(apiKey)).requests).toHaveLength(1);
    // Why a timeout is not a failure: the provider finishes the work anyway.
    await eventually('an effect in the ledger', async () => (await ledger(apiKey)).effects.length > 0, 3000);
    const effects = (await ledger(apiKey)).effects.length;
    expect(effects).toBe(1);
    expect((await ledger(apiKey)).requests).toHaveLength(1);
  });

  it.each([500, 502, 504])('status %d: OutcomeUnknown, one request, no effect', async (status) => {
    const { apiKey, key, reference } = newMerchant();
    await fault({ match: { key }, fault: 'status', status, times: 1 });
    const e = await providerFailure(provider(apiKey).createPayment(charge(reference), ctx(key)));
    expect(e.type).toBe(ErrorType.OutcomeUnknown);
    expect(e.details).toMatchObject({ status, reason: 'status', code: 'simulated_fault' });
    const l = await ledger(apiKey);
    expect(l.requests).toHaveLength(1);
    expect(l.effects).toHaveLength(0);
  });

  it.each<[number, number | undefined, number | undefined]>([
    [503, 7, 7000],
    [503, undefined, undefined],
    [429, undefined, undefined],
    [429, 2, 2000],
  ])('status %d with retry_after_s %p: ProviderUnavailable, retryAfterMs %p', async (status, retryAfterS, ms) => {
    const { apiKey, key, reference } = newMerchant();
    await fault({
      match: { key },
      fault: 'status',
      status,
      times: 1,
      ...(retryAfterS === undefined ? {} : { retry_after_s: retryAfterS }),
    });
    const e = await providerFailure(provider(apiKey).createPayment(charge(reference), ctx(key)));
    expect(e.type).toBe(ErrorType.ProviderUnavailable);
    expect(e.details.status).toBe(status);
    expect(e.details.retryAfterMs).toBe(ms);
    expect((await ledger(apiKey)).requests).toHaveLength(1);
  });

  it('409 idempotency_key_in_use: a concurrent request with the same key is ProviderUnavailable', async () => {
    const { apiKey, key, reference } = newMerchant();
    await fault({ match: { key }, fault: 'latency', latency_ms: 400, times: 1 });
    const p = provider(apiKey);
    const first = p.createPayment(charge(reference), ctx(key));
    // The first request holds the key (claimed before the latency); send the second only once it has arrived.
    await eventually('one request in the ledger', async () => (await ledger(apiKey)).requests.length === 1, 2000);
    const e = await providerFailure(p.createPayment(charge(reference), ctx(key, 2)));
    expect(e.type).toBe(ErrorType.ProviderUnavailable);
    expect(e.details).toMatchObject({ status: 409, code: 'idempotency_key_in_use' });
    expect((await first).outcome).toBe('succeeded');
    const l = await ledger(apiKey);
    expect(l.effects).toHaveLength(1);
    expect(l.requests).toHaveLength(2);
  });
});

describe('a merchant without idempotency', () => {
  it('the same key twice is two effects: why a workflow looks up before it resends', async () => {
    const { apiKey, key, reference } = newMerchant();
    await control('PUT', `/_sim/merchants/${apiKey}`, { idempotency: false });
    const p = provider(apiKey, { keys: false });
    expect(p.capabilities).toMatchObject({ idempotencyKeys: false, keyTtlSeconds: null });
    const a = await p.createPayment(charge(reference), ctx(key));
    const b = await p.createPayment(charge(reference), ctx(key, 2));
    if (a.outcome === 'declined' || b.outcome === 'declined') throw new Error('declined');
    expect(b.replayed).toBe(false);
    expect(b.payment.id).not.toBe(a.payment.id);
    expect((await ledger(apiKey)).effects).toHaveLength(2);
    expect((await p.findByReference(reference)).map((x) => x.id).sort()).toEqual([a.payment.id, b.payment.id].sort());
  });
});

describe('lookups', () => {
  it('getPayment: null on 404; findByIdempotencyKey: null for an unknown key', async () => {
    const { apiKey, key } = newMerchant();
    const p = provider(apiKey);
    expect(await p.getPayment('pay_missing')).toBeNull();
    expect(await p.findByIdempotencyKey(key)).toBeNull();
    expect(await p.findByReference('order_none')).toEqual([]);
  });

  it('listPayments pages by starting_after and filters by creation time', async () => {
    const { apiKey, key, reference } = newMerchant();
    const p = provider(apiKey);
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const r = await p.createPayment(charge(reference), ctx(`${key}:${i}`));
      if (r.outcome !== 'declined') ids.push(r.payment.id);
    }
    const first = await p.listPayments({ limit: 2 });
    expect(first.data).toHaveLength(2);
    expect(first.hasMore).toBe(true);
    const last = first.data.at(-1);
    const second = await p.listPayments({ limit: 2, startingAfter: last?.id });
    expect(second.hasMore).toBe(false);
    expect([...first.data, ...second.data].map((x) => x.id).sort()).toEqual([...ids].sort());
    const created = first.data[0]?.created ?? 0;
    expect((await p.listPayments({ createdGte: created + 3600 })).data).toEqual([]);
    expect((await p.listPayments({ createdGte: created - 60, createdLt: created + 60 })).data).toHaveLength(3);
  });
});

describe('logging', () => {
  it('one line per call with keyHash, never the api key, token, Authorization, key or body', async () => {
    const { apiKey, key, reference } = newMerchant();
    const mem = memoryLogger();
    const p = provider(apiKey, { logger: mem.logger });
    const token = `pm_card_secret_${randomUUID()}`;
    // A distinctive amount: the body must not show up, and no uuid or hash will contain these seven digits by chance.
    await p.createPayment(charge(reference, { paymentMethod: token, amount: 7_654_321 }), {
      idempotencyKey: key,
      attempt: 2,
      requestId: 'req_1',
    });
    await p.createPayment(charge(reference, { paymentMethod: 'pm_decline_fraudulent' }), ctx(`${key}:d`));
    await fault({ match: { key: `${key}:f` }, fault: 'status', status: 503, retry_after_s: 1, times: 1 });
    await providerFailure(p.createPayment(charge(reference, { paymentMethod: token }), ctx(`${key}:f`)));
    await p.findByIdempotencyKey(key);

    const text = mem.text();
    for (const secret of [apiKey, token, 'Bearer', 'authorization', key, reference, 'payment_method', '7654321']) {
      expect(text).not.toContain(secret);
    }
    const lines = mem.lines();
    expect(lines).toHaveLength(4);
    expect(lines[0]).toMatchObject({
      msg: 'provider call',
      provider: 'simulator',
      operation: 'create',
      method: 'POST',
      route: '/v1/payments',
      requestId: 'req_1',
      keyHash: keyHash(key),
      attempt: 2,
      status: 200,
      outcome: 'succeeded',
      durationMs: expect.any(Number),
    });
    expect(lines[1]).toMatchObject({
      status: 402,
      outcome: 'declined',
      code: 'fraudulent',
      keyHash: keyHash(`${key}:d`),
    });
    expect(lines[2]).toMatchObject({
      status: 503,
      outcome: ErrorType.ProviderUnavailable,
      reason: 'status',
      retryAfterMs: 1000,
      keyHash: keyHash(`${key}:f`),
    });
    expect(lines[3]).toMatchObject({
      method: 'GET',
      route: '/v1/payments',
      operation: 'lookup',
      keyHash: keyHash(key),
      outcome: 'succeeded',
      requestId: expect.stringMatching(/^req_/),
    });
  });
});
