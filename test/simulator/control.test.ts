import { startSimulator, type RunningSimulator, type SimLogEntry } from '../../src/simulator/server';
import { call, createBody, newApiKey, newKey } from './helpers';

const logs: SimLogEntry[] = [];
let sim: RunningSimulator;
beforeAll(async () => {
  sim = await startSimulator({ port: 0, logger: (entry) => logs.push(entry) });
});
afterAll(() => sim.close());

describe('control endpoints', () => {
  it('serves the ledger over HTTP, optionally for one api key', async () => {
    const [a, b] = [newApiKey(), newApiKey()];
    await call(sim, 'POST', '/v1/payments', { apiKey: a, key: newKey(), body: createBody() });
    await call(sim, 'POST', '/v1/payments', { apiKey: b, key: newKey(), body: createBody() });
    const all = await call(sim, 'GET', '/_sim/ledger');
    expect((all.body.effects as unknown[]).length).toBeGreaterThanOrEqual(2);
    const onlyA = await call(sim, 'GET', `/_sim/ledger?api_key=${a}`);
    expect(onlyA.body).toEqual({
      effects: [expect.objectContaining({ api_key: a, operation: 'create', payment_id: expect.any(String) })],
      requests: [expect.objectContaining({ api_key: a, operation: 'create', status: 200 })],
    });
  });

  it('moves the clock over HTTP and refuses going back', async () => {
    const before = (await call(sim, 'GET', '/_sim/clock')).body.now as number;
    const advanced = await call(sim, 'POST', '/_sim/clock/advance', { body: { seconds: 3600 } });
    expect(advanced.body.now).toBeGreaterThanOrEqual(before + 3600);
    expect((await call(sim, 'POST', '/_sim/clock/advance', { body: { seconds: -1 } })).status).toBe(400);
  });

  it('reads and writes merchant settings with defaults', async () => {
    const apiKey = newApiKey();
    expect((await call(sim, 'GET', `/_sim/merchants/${apiKey}`)).body).toEqual({
      idempotency: true,
      key_ttl_s: 86_400,
      webhook_duplicate: false,
      webhook_reorder: false,
    });
    const put = await call(sim, 'PUT', `/_sim/merchants/${apiKey}`, { body: { idempotency: false, key_ttl_s: 5 } });
    expect(put.body).toMatchObject({ idempotency: false, key_ttl_s: 5 });
    expect((await call(sim, 'PUT', `/_sim/merchants/${apiKey}`, { body: { key_ttl_s: 0 } })).status).toBe(400);
  });

  it('answers unknown routes and methods with JSON errors', async () => {
    expect((await call(sim, 'GET', '/v2/nothing')).status).toBe(404);
    expect((await call(sim, 'DELETE', '/v1/payments', { apiKey: newApiKey() })).status).toBe(405);
    expect((await call(sim, 'GET', '/_sim/health')).body).toEqual({ ok: true });
  });

  it('never logs api keys', async () => {
    const apiKey = newApiKey();
    await call(sim, 'PUT', `/_sim/merchants/${apiKey}`, { body: {} });
    await call(sim, 'POST', '/v1/payments', { apiKey, key: newKey(), body: createBody() });
    await call(sim, 'GET', `/_sim/ledger?api_key=${apiKey}`);
    expect(logs.length).toBeGreaterThan(0);
    expect(JSON.stringify(logs)).not.toContain(apiKey);
  });

  it('resets everything', async () => {
    const own = await startSimulator({ port: 0 });
    try {
      await call(own, 'POST', '/v1/payments', { apiKey: newApiKey(), key: newKey(), body: createBody() });
      own.addFaults({ rules: [{ fault: 'latency', latency_ms: 1 }] });
      await call(own, 'POST', '/_sim/reset');
      expect(own.ledger()).toEqual({ effects: [], requests: [] });
      expect(own.faults()).toEqual([]);
    } finally {
      await own.close();
    }
  });
});
