/**
 * The soak's key-record verdict (bench/soak-key-records.ts): which keys it expects recorded, and that a key without
 * its row in `key_records` (this file's PostgreSQL database, migrated by the product) is reported missing.
 */
import { KeyRecords } from '../../src/key-records';
import { expectedKeyScopes, missingKeyRecords } from '../../bench/soak-key-records';
import { openTestDatabase } from '../helpers/database';

let db: Awaited<ReturnType<typeof openTestDatabase>>;
beforeAll(async () => {
  db = await openTestDatabase();
});
afterAll(async () => {
  await db?.drop();
});

const view = (status: string, operations: { kind: string; key: string; state: string }[] = []) => ({
  status,
  operations,
});

it('expects the charge of every answered payment, and the captures and refunds its final view shows succeeded', () => {
  expect(
    expectedKeyScopes([
      {
        merchantId: 'm',
        key: 'p1',
        view: view('succeeded', [
          { kind: 'capture', key: 'c1', state: 'succeeded' },
          { kind: 'refund', key: 'r1', state: 'succeeded' },
          { kind: 'refund', key: 'r2', state: 'failed' },
          { kind: 'void', key: 'v1', state: 'succeeded' },
        ]),
      },
      { merchantId: 'n', key: 'p2', view: view('declined') },
      { merchantId: 'm', key: 'p3', view: view('needs_review') },
      { merchantId: 'm', key: 'p4', view: { error: 'unreadable' } },
      { merchantId: 'm', key: 'p5', view: undefined },
    ]),
  ).toEqual(['charge:m:p1', 'charge:n:p2', 'capture:m:c1', 'refund:m:r1']);
});

it('reports the keys that have no record, and none once each has one', async () => {
  const records = new KeyRecords(db.pool);
  const answer = (key: string) =>
    records.record({ merchantId: 'm', operation: 'charge', key, fingerprint: 'f', view: { status: 'succeeded' } });
  await answer('a');
  expect(await missingKeyRecords(db.pool, ['charge:m:a', 'charge:m:b', 'refund:m:a'], 0)).toEqual([
    'charge:m:b',
    'refund:m:a',
  ]);
  // A record that lands while the verdict waits is found.
  setTimeout(() => void answer('b'), 500);
  expect(await missingKeyRecords(db.pool, ['charge:m:a', 'charge:m:b'], 10_000)).toEqual([]);
});
