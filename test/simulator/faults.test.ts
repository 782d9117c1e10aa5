import { mulberry32 } from '../../src/simulator/faults';
import { startSimulator, type RunningSimulator } from '../../src/simulator/server';
import { call, createBody, newApiKey, newKey, waitFor } from './helpers';

let sim: RunningSimulator;
beforeAll(async () => {
  sim = await startSimulator({ port: 0 });
});
afterEach(() => sim.clearFaults());
afterAll(() => sim.close());

const effectsOf = (apiKey: string) => sim.ledger().effects.filter((e) => e.api_key === apiKey);
const requestsOf = (apiKey: string) => sim.ledger().requests.filter((r) => r.api_key === apiKey);

/** The error code under fetch's "fetch failed" TypeError. */
async function failureCode(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (err) {
    const cause = (err as { cause?: { code?: string } }).cause;
    return cause?.code ?? 'unknown';
  }
  throw new Error('expected the request to fail');
}

describe('faults', () => {
  it('commit_then_drop: commits and stores the response, then drops the connection', async () => {
    const apiKey = newApiKey();
    const key = newKey();
    const body = createBody();
    sim.addFaults({ rules: [{ match: { key }, fault: 'commit_then_drop', times: 1 }] });

    expect(await failureCode(call(sim, 'POST', '/v1/payments', { apiKey, key, body }))).toBe('UND_ERR_SOCKET');
    expect(effectsOf(apiKey)).toHaveLength(1);
    expect(requestsOf(apiKey)).toEqual([
      expect.objectContaining({ operation: 'create', idempotency_key: key, status: null, fault: 'commit_then_drop' }),
    ]);

    // The caller does not know the outcome; a lookup by key finds the payment, and a retry replays it.
    const found = await call(sim, 'GET', `/v1/payments?idempotency_key=${key}`, { apiKey });
    expect(found.body.data).toEqual([expect.objectContaining({ id: effectsOf(apiKey)[0]?.payment_id })]);
    const retry = await call(sim, 'POST', '/v1/payments', { apiKey, key, body });
    expect(retry.status).toBe(200);
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(effectsOf(apiKey)).toHaveLength(1);
  });

  it('reset_before_commit: resets the connection and commits nothing, so a retry makes the effect', async () => {
    const apiKey = newApiKey();
    const key = newKey();
    const body = createBody();
    sim.addFaults({ rules: [{ match: { key }, fault: 'reset_before_commit', times: 1 }] });

    expect(await failureCode(call(sim, 'POST', '/v1/payments', { apiKey, key, body }))).toBe('ECONNRESET');
    expect(effectsOf(apiKey)).toHaveLength(0);
    expect(requestsOf(apiKey)).toEqual([expect.objectContaining({ status: null, fault: 'reset_before_commit' })]);

    const retry = await call(sim, 'POST', '/v1/payments', { apiKey, key, body });
    expect(retry.status).toBe(200);
    expect(retry.headers.get('idempotent-replayed')).toBeNull();
    expect(effectsOf(apiKey)).toHaveLength(1);
  });

  it('status: answers 503 with Retry-After before commit, `times` times', async () => {
    const apiKey = newApiKey();
    const key = newKey();
    const body = createBody();
    sim.addFaults({
      rules: [
        { match: { reference: String(body.reference) }, fault: 'status', status: 503, retry_after_s: 2, times: 2 },
      ],
    });

    for (let i = 0; i < 2; i++) {
      const res = await call(sim, 'POST', '/v1/payments', { apiKey, key, body });
      expect(res.status).toBe(503);
      expect(res.headers.get('retry-after')).toBe('2');
      expect(res.body).toMatchObject({ error: { type: 'api_error' } });
    }
    expect(effectsOf(apiKey)).toHaveLength(0);
    expect(sim.faults()).toEqual([expect.objectContaining({ remaining: 0, hits: 2 })]);

    const third = await call(sim, 'POST', '/v1/payments', { apiKey, key, body });
    expect(third.status).toBe(200);
    expect(third.headers.get('idempotent-replayed')).toBeNull();
    expect(requestsOf(apiKey).map((r) => r.status)).toEqual([503, 503, 200]);
  });

  it('status without retry_after_s sends no Retry-After', async () => {
    const apiKey = newApiKey();
    sim.addFaults({ rules: [{ match: { operation: 'lookup' }, fault: 'status', status: 502, times: 1 }] });
    const res = await call(sim, 'GET', '/v1/payments', { apiKey });
    expect(res.status).toBe(502);
    expect(res.headers.get('retry-after')).toBeNull();
  });

  it('latency: a client that times out still leaves a committed effect behind', async () => {
    const apiKey = newApiKey();
    const key = newKey();
    sim.addFaults({ rules: [{ match: { key }, fault: 'latency', latency_ms: 1_500 }] });
    const client = new AbortController();
    const answer = fetch(`${sim.url}/v1/payments`, {
      method: 'POST',
      headers: { authorization: `Bearer ${apiKey}`, 'idempotency-key': key, 'content-type': 'application/json' },
      body: JSON.stringify(createBody()),
      signal: client.signal,
    });
    // The client gives up once the simulator has the request (a client-side timeout, without a race against
    // connection set-up): nothing is committed yet when it does, and the effect still comes afterwards.
    await waitFor('the simulator to get the request', () => requestsOf(apiKey).length === 1);
    client.abort();
    await expect(answer).rejects.toThrow();
    expect(effectsOf(apiKey)).toHaveLength(0);
    await waitFor('the delayed commit', () => effectsOf(apiKey).length === 1);
    expect(requestsOf(apiKey)[0]).toMatchObject({ fault: 'latency' });
  });

  it('matches capture, void and lookup by the payment’s reference', async () => {
    const apiKey = newApiKey();
    const body = createBody({ capture: 'manual' });
    const reference = String(body.reference);
    const { body: payment } = await call(sim, 'POST', '/v1/payments', { apiKey, key: newKey(), body });
    const id = String(payment.id);
    sim.addFaults({
      rules: [
        { match: { operation: 'capture', reference }, fault: 'status', status: 500, times: 1 },
        { match: { operation: 'lookup', reference }, fault: 'commit_then_drop', times: 1 },
      ],
    });
    expect((await call(sim, 'POST', `/v1/payments/${id}/capture`, { apiKey, key: newKey() })).status).toBe(500);
    expect((await call(sim, 'POST', `/v1/payments/${id}/void`, { apiKey, key: newKey() })).status).toBe(200);
    expect(await failureCode(call(sim, 'GET', `/v1/payments/${id}`, { apiKey }))).toBe('UND_ERR_SOCKET');
    expect(requestsOf(apiKey).map((r) => [r.operation, r.reference, r.status, r.fault ?? null])).toEqual([
      ['create', reference, 200, null],
      ['capture', reference, 500, 'status'],
      ['void', reference, 200, null],
      ['lookup', reference, null, 'commit_then_drop'],
    ]);
  });

  it('draws probabilities from the seeded PRNG: the same seed gives the same faults', async () => {
    const apiKey = newApiKey();
    const rule = { match: { operation: 'lookup' as const, key: 'probe' }, fault: 'status' as const, probability: 0.5 };
    const run = async (): Promise<number[]> => {
      sim.addFaults({ rules: [rule], seed: 42 });
      const statuses: number[] = [];
      for (let i = 0; i < 20; i++) {
        statuses.push((await call(sim, 'GET', '/v1/payments?idempotency_key=probe', { apiKey })).status);
      }
      sim.clearFaults();
      return statuses;
    };
    const first = await run();
    const second = await run();
    expect(second).toEqual(first);
    expect(first).toContain(200);
    expect(first).toContain(503);
  });

  it('takes rules over HTTP and refuses invalid ones', async () => {
    const added = await call(sim, 'POST', '/_sim/faults', {
      body: { rules: [{ match: { operation: 'void' }, fault: 'latency', latency_ms: 5 }], seed: 7 },
    });
    expect(added.status).toBe(200);
    expect(added.body.rules).toEqual([expect.objectContaining({ fault: 'latency', remaining: null, hits: 0 })]);
    const invalid = await call(sim, 'POST', '/_sim/faults', { body: { rules: [{ fault: 'explode' }] } });
    expect(invalid.status).toBe(400);
    expect(invalid.body).toMatchObject({ error: { param: 'rules.0.fault' } });
    expect((await call(sim, 'DELETE', '/_sim/faults')).body).toEqual({ rules: [] });
    expect(sim.faults()).toEqual([]);
  });
});

describe('mulberry32', () => {
  it('is deterministic per seed and spreads over [0, 1)', () => {
    const a = mulberry32(1);
    const b = mulberry32(1);
    const xs = Array.from({ length: 1000 }, () => a());
    expect(Array.from({ length: 1000 }, () => b())).toEqual(xs);
    expect(xs.every((x) => x >= 0 && x < 1)).toBe(true);
    const mean = xs.reduce((s, x) => s + x, 0) / xs.length;
    expect(mean).toBeGreaterThan(0.45);
    expect(mean).toBeLessThan(0.55);
    expect(mulberry32(2)()).not.toEqual(mulberry32(1)());
  });
});
