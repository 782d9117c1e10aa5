import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startSimulator } from '../../src/simulator/server';
import { restoreState } from '../../src/simulator/persistence';
import { SimStore } from '../../src/simulator/store';
import { call, createBody, newApiKey, newKey } from './helpers';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sim-state-'));
});
afterEach(() => rm(dir, { recursive: true, force: true }));

describe('persistence', () => {
  it('keeps payments, keys, merchants, the ledger and the clock across a restart', async () => {
    const statePath = join(dir, 'state.json');
    const apiKey = newApiKey();
    const key = newKey();
    const body = createBody({ capture: 'manual' });

    const first = await startSimulator({ port: 0, statePath });
    await first.setMerchant(apiKey, { key_ttl_s: 100 });
    const created = await call(first, 'POST', '/v1/payments', { apiKey, key, body });
    await first.advanceClock(50);
    await call(first, 'POST', `/v1/payments/${String(created.body.id)}/capture`, { apiKey, key: newKey() });
    const ledgerBefore = first.ledger();
    await first.close();

    const second = await startSimulator({ port: 0, statePath });
    try {
      expect(second.ledger()).toEqual(ledgerBefore);
      expect(second.merchant(apiKey)).toMatchObject({ key_ttl_s: 100 });
      expect(second.nowS() - Math.floor(Date.now() / 1000)).toBeGreaterThanOrEqual(49);
      const got = await call(second, 'GET', `/v1/payments/${String(created.body.id)}`, { apiKey });
      expect(got.body).toMatchObject({ status: 'succeeded', amount_captured: 1000 });

      const replay = await call(second, 'POST', '/v1/payments', { apiKey, key, body });
      expect(replay.headers.get('idempotent-replayed')).toBe('true');
      expect(replay.body).toEqual(created.body);

      const another = await call(second, 'POST', '/v1/payments', { apiKey, key: newKey(), body: createBody() });
      expect(another.body.id).not.toEqual(created.body.id);

      // The key's lifetime counts on the restored clock: 50 + 51 s is past its 100 s.
      await second.advanceClock(51);
      const expired = await call(second, 'POST', '/v1/payments', { apiKey, key, body });
      expect(expired.headers.get('idempotent-replayed')).toBeNull();
      expect(expired.body.id).not.toEqual(created.body.id);
    } finally {
      await second.close();
    }
    expect((await readdir(dir)).filter((f) => f.endsWith('.tmp'))).toEqual([]);
  });

  it('has the effect on disk before a dropped connection, so a crash right after keeps it', async () => {
    const statePath = join(dir, 'state.json');
    const sim = await startSimulator({ port: 0, statePath });
    try {
      const apiKey = newApiKey();
      const key = newKey();
      sim.addFaults({ rules: [{ match: { key }, fault: 'commit_then_drop' }] });
      await expect(call(sim, 'POST', '/v1/payments', { apiKey, key, body: createBody() })).rejects.toThrow();
      const restored = new SimStore();
      await restoreState(restored, statePath);
      const saved = restored.toState();
      expect(saved.ledger.effects).toEqual([expect.objectContaining({ api_key: apiKey, idempotency_key: key })]);
      expect(saved.idempotency).toEqual([
        expect.objectContaining({ key, response: expect.objectContaining({ status: 200 }) }),
      ]);
    } finally {
      await sim.close();
    }
  });

  it('refuses to start on a corrupt state file instead of silently starting empty', async () => {
    const statePath = join(dir, 'state.json');
    await writeFile(statePath, '{"version":1,', 'utf8');
    await expect(startSimulator({ port: 0, statePath })).rejects.toThrow();
  });

  it('starts empty when the state file does not exist yet', async () => {
    const sim = await startSimulator({ port: 0, statePath: join(dir, 'fresh.json') });
    expect(sim.ledger()).toEqual({ effects: [], requests: [] });
    await sim.close();
  });
});
