/**
 * The soak's key-record verdict (bench/soak-key-records.ts): which keys it expects recorded, and that a key without
 * its row in `key_records` (this file's PostgreSQL database, migrated by the product) is reported missing.
 */
import { KeyRecords } from '../../src/key-records';
import { expectedKeyScopes, missingKeyRecords } from '../../bench/soak-key-records';
import type { SoakView } from '../../bench/soak-check';
import { openTestDatabase } from '../helpers/database';

let db: Awaited<ReturnType<typeof openTestDatabase>>;
beforeAll(async () => {
  db = await openTestDatabase();
});
afterAll(async () => {
  await db?.drop();
});

const view = (operations: { kind: string; key: string; state: string }[]) =>
  ({ key: 'k', status: 'succeeded', amount: 1_000, currency: 'EUR', operations }) as unknown as SoakView;

it('expects every charge it was given, and the captures and refunds its final view shows succeeded', () => {
  const views = new Map<string, SoakView>([
    [
      'p1',
      view([
        { kind: 'capture', key: 'c1', state: 'succeeded' },
        { kind: 'refund', key: 'r1', state: 'succeeded' },
        { kind: 'refund', key: 'r2', state: 'failed' },
        { kind: 'void', key: 'v1', state: 'succeeded' },
      ]),
    ],
    ['p2', { error: 'unreadable' }],
  ]);
  expect(expectedKeyScopes('m', ['p1', 'p2', 'p3'], views)).toEqual([
    'charge:m:p1',
    'charge:m:p2',
    'charge:m:p3',
    'capture:m:c1',
    'refund:m:r1',
  ]);
});

it('reports the keys that have no record, and none once each has one', async () => {
  const records = new KeyRecords(db.pool);
  const answer = (key: string) =>
    records.record({ merchantId: 'm', operation: 'charge', key, fingerprint: 'f', view: { status: 'succeeded' } });
  await answer('a');
  expect(await missingKeyRecords(db.url, ['charge:m:a', 'charge:m:b', 'refund:m:a'], 0)).toEqual([
    'charge:m:b',
    'refund:m:a',
  ]);
  // A record that lands while the verdict waits is found.
  setTimeout(() => void answer('b'), 500);
  expect(await missingKeyRecords(db.url, ['charge:m:a', 'charge:m:b'], 10_000)).toEqual([]);
});
