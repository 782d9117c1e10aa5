import { canonicalJson } from '../../src/simulator/idempotency';
import { startSimulator, type RunningSimulator } from '../../src/simulator/server';
import { call, createBody, newApiKey, newKey, waitFor } from './helpers';

let sim: RunningSimulator;
beforeAll(async () => {
  sim = await startSimulator({ port: 0 });
});
afterEach(() => sim.clearFaults());
afterAll(() => sim.close());

const effectsOf = (apiKey: string) => sim.ledger().effects.filter((e) => e.api_key === apiKey);

describe('idempotency', () => {
  it('lets exactly one of 50 concurrent identical requests have an effect', async () => {
    const apiKey = newApiKey();
    const key = newKey();
    const body = createBody();
    // The first request holds the key for 5 s: on a loaded CI machine none of 49 local requests had arrived within 500 ms.
    sim.addFaults({ rules: [{ match: { key }, fault: 'latency', latency_ms: 5_000, times: 1 }] });
    const first = call(sim, 'POST', '/v1/payments', { apiKey, key, body });
    // The rule is spent in the same tick as the key is claimed, so from here the first request holds the key.
    await waitFor('the first request to claim the key', () => sim.faults()[0]?.remaining === 0);
    const others = await Promise.all(
      Array.from({ length: 49 }, () => call(sim, 'POST', '/v1/payments', { apiKey, key, body })),
    );
    const winner = await first;

    expect(winner.status).toBe(200);
    expect(winner.headers.get('idempotent-replayed')).toBeNull();
    for (const res of others) {
      if (res.status === 409) {
        expect(res.body).toMatchObject({ error: { type: 'idempotency_error', code: 'idempotency_key_in_use' } });
      } else {
        expect(res.status).toBe(200);
        expect(res.headers.get('idempotent-replayed')).toBe('true');
        expect(res.body).toEqual(winner.body);
      }
    }
    expect(others.some((r) => r.status === 409)).toBe(true);
    expect(effectsOf(apiKey)).toHaveLength(1);

    const later = await call(sim, 'POST', '/v1/payments', { apiKey, key, body });
    expect(later.status).toBe(200);
    expect(later.headers.get('idempotent-replayed')).toBe('true');
    expect(later.body).toEqual(winner.body);
    expect(sim.ledger().requests.filter((r) => r.api_key === apiKey && r.replayed)).not.toHaveLength(0);
  });

  it('refuses the same key with other parameters (422) and makes no second effect', async () => {
    const apiKey = newApiKey();
    const key = newKey();
    const body = createBody({ amount: 1000 });
    expect((await call(sim, 'POST', '/v1/payments', { apiKey, key, body })).status).toBe(200);
    const changed = await call(sim, 'POST', '/v1/payments', { apiKey, key, body: { ...body, amount: 1001 } });
    expect(changed.status).toBe(422);
    expect(changed.body).toMatchObject({ error: { type: 'idempotency_error', code: 'idempotency_key_mismatch' } });
    expect(effectsOf(apiKey)).toHaveLength(1);
  });

  it('treats the same key on another operation or path as a mismatch', async () => {
    const apiKey = newApiKey();
    const key = newKey();
    const created = await call(sim, 'POST', '/v1/payments', { apiKey, key, body: createBody({ capture: 'manual' }) });
    const capture = await call(sim, 'POST', `/v1/payments/${String(created.body.id)}/capture`, { apiKey, key });
    expect(capture.status).toBe(422);
    expect(effectsOf(apiKey)).toHaveLength(1);
  });

  it('fingerprints the parsed body, not its bytes (key order does not matter)', async () => {
    const apiKey = newApiKey();
    const key = newKey();
    const send = (raw: string) =>
      fetch(`${sim.url}/v1/payments`, {
        method: 'POST',
        headers: { authorization: `Bearer ${apiKey}`, 'idempotency-key': key, 'content-type': 'application/json' },
        body: raw,
      });
    const body = createBody();
    const reversed = Object.fromEntries(Object.entries(body).reverse());
    expect((await send(JSON.stringify(body))).status).toBe(200);
    const again = await send(JSON.stringify(reversed, null, 2));
    expect(again.status).toBe(200);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(canonicalJson(body)).toBe(canonicalJson(reversed));
  });

  it('replays a stored decline', async () => {
    const apiKey = newApiKey();
    const key = newKey();
    const body = createBody({ payment_method: 'pm_decline' });
    const first = await call(sim, 'POST', '/v1/payments', { apiKey, key, body });
    const second = await call(sim, 'POST', '/v1/payments', { apiKey, key, body });
    expect([first.status, second.status]).toEqual([402, 402]);
    expect(second.headers.get('idempotent-replayed')).toBe('true');
    expect(second.body).toEqual(first.body);
  });

  it('stores nothing for a request that fails validation', async () => {
    const apiKey = newApiKey();
    const key = newKey();
    const invalid = await call(sim, 'POST', '/v1/payments', { apiKey, key, body: createBody({ amount: -1 }) });
    expect(invalid.status).toBe(400);
    const valid = await call(sim, 'POST', '/v1/payments', { apiKey, key, body: createBody() });
    expect(valid.status).toBe(200);
    expect(valid.headers.get('idempotent-replayed')).toBeNull();
  });

  it('replays captures and refunds too', async () => {
    const apiKey = newApiKey();
    const { body } = await call(sim, 'POST', '/v1/payments', { apiKey, key: newKey(), body: createBody() });
    const key = newKey();
    const path = `/v1/payments/${String(body.id)}/refunds`;
    const first = await call(sim, 'POST', path, { apiKey, key, body: { amount: 100 } });
    const second = await call(sim, 'POST', path, { apiKey, key, body: { amount: 100 } });
    expect(second.body).toEqual(first.body);
    expect(second.headers.get('idempotent-replayed')).toBe('true');
    expect(effectsOf(apiKey).map((e) => e.operation)).toEqual(['create', 'refund']);
  });

  it('scopes keys per api key', async () => {
    const key = newKey();
    const body = createBody();
    const [a, b] = [newApiKey(), newApiKey()];
    const ra = await call(sim, 'POST', '/v1/payments', { apiKey: a, key, body });
    const rb = await call(sim, 'POST', '/v1/payments', { apiKey: b, key, body });
    expect(ra.body.id).not.toEqual(rb.body.id);
    expect(rb.headers.get('idempotent-replayed')).toBeNull();
  });

  it('forgets a key after key_ttl_s on the simulator clock: the same key makes a new effect', async () => {
    const apiKey = newApiKey();
    await sim.setMerchant(apiKey, { idempotency: true, key_ttl_s: 60 });
    const key = newKey();
    const body = createBody();
    const first = await call(sim, 'POST', '/v1/payments', { apiKey, key, body });
    await call(sim, 'POST', '/_sim/clock/advance', { body: { seconds: 30 } });
    const within = await call(sim, 'POST', '/v1/payments', { apiKey, key, body });
    expect(within.headers.get('idempotent-replayed')).toBe('true');
    await call(sim, 'POST', '/_sim/clock/advance', { body: { seconds: 31 } });
    const after = await call(sim, 'POST', '/v1/payments', { apiKey, key, body });
    expect(after.status).toBe(200);
    expect(after.headers.get('idempotent-replayed')).toBeNull();
    expect(after.body.id).not.toEqual(first.body.id);
    expect(effectsOf(apiKey)).toHaveLength(2);
  });

  it('ignores keys for a merchant without idempotency: every POST is a new effect', async () => {
    const apiKey = newApiKey();
    const put = await call(sim, 'PUT', `/_sim/merchants/${apiKey}`, { body: { idempotency: false, key_ttl_s: 60 } });
    expect(put.body).toMatchObject({ idempotency: false, key_ttl_s: 60 });
    const key = newKey();
    const body = createBody();
    const first = await call(sim, 'POST', '/v1/payments', { apiKey, key, body });
    const second = await call(sim, 'POST', '/v1/payments', { apiKey, key, body });
    expect(second.headers.get('idempotent-replayed')).toBeNull();
    expect(second.body.id).not.toEqual(first.body.id);
    expect(effectsOf(apiKey)).toHaveLength(2);
    // Lookup by key still finds what the key created: both payments.
    const byKey = await call(sim, 'GET', `/v1/payments?idempotency_key=${key}`, { apiKey });
    expect(byKey.body.data).toHaveLength(2);
  });

  it('treats POSTs without a key as new effects', async () => {
    const apiKey = newApiKey();
    const body = createBody();
    await call(sim, 'POST', '/v1/payments', { apiKey, body });
    await call(sim, 'POST', '/v1/payments', { apiKey, body });
    expect(effectsOf(apiKey)).toHaveLength(2);
  });

  it('refuses a key longer than 255 characters', async () => {
    const res = await call(sim, 'POST', '/v1/payments', {
      apiKey: newApiKey(),
      key: 'k'.repeat(256),
      body: createBody(),
    });
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ error: { code: 'idempotency_key_invalid' } });
  });
});
