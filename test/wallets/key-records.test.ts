/** Key records on a real PostgreSQL: the first terminal answer wins, it answers until its expiry, pruning removes it. */
import { KeyRecords, defaultKeyRetentionDays, keyScope } from '../../src/key-records';
import { openTestDatabase } from '../helpers/database';

let db: Awaited<ReturnType<typeof openTestDatabase>>;
let now = Date.parse('2026-01-01T00:00:00Z');
const day = 86_400_000;

beforeAll(async () => {
  db = await openTestDatabase();
});
afterAll(() => db.drop());

it('keeps the first terminal view of a key for KEY_RETENTION_DAYS (31 by default), then prunes it', async () => {
  const records = new KeyRecords(db.pool, undefined, () => now);
  const first = { merchantId: 'm1', operation: 'charge', key: 'k1', fingerprint: 'f1', view: { status: 'declined' } };

  const recorded = await records.record(first);
  const second = await records.record({ ...first, fingerprint: 'f2', view: { status: 'succeeded' } });

  expect(defaultKeyRetentionDays).toBe(31);
  expect(recorded).toMatchObject({
    scope: keyScope('charge', 'm1', 'k1'),
    fingerprint: 'f1',
    view: { status: 'declined' },
  });
  expect(recorded.expiresAt.getTime() - recorded.recordedAt.getTime()).toBe(31 * day);
  expect(second).toEqual(recorded);
  expect(await records.find('charge', 'm1', 'k1')).toEqual(recorded);
  expect(await records.find('charge', 'm2', 'k1')).toBeUndefined();
  expect(await records.find('capture', 'm1', 'k1')).toBeUndefined();

  now += 30 * day;
  expect(await records.prune()).toBe(0);
  expect(await records.find('charge', 'm1', 'k1')).toEqual(recorded);

  now += 2 * day;
  // Expired: it answers nothing even before the pruner ran, then the pruner removes it.
  expect(await records.find('charge', 'm1', 'k1')).toBeUndefined();
  expect(await records.prune()).toBe(1);
  expect((await db.pool.query('SELECT 1 FROM key_records')).rowCount).toBe(0);
});

it('prunes in batches until no expired record is left', async () => {
  const records = new KeyRecords(db.pool, 1, () => now);
  for (let i = 0; i < 25; i++) {
    await records.record({ merchantId: 'm1', operation: 'refund', key: `r${i}`, fingerprint: 'f', view: { i } });
  }
  now += 2 * day;
  expect(await records.prune(10)).toBe(25);
});
