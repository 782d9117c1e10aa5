/**
 * The soak's key-record verdict (bench/soak-key-records.ts): which keys it expects recorded, and that a key without
 * its row in `key_records` (this file's PostgreSQL database, migrated by the product) is reported missing, and a
 * record unlike what its client was answered is reported unlike.
 */
import { KeyRecords } from '../../src/key-records';
import { expectedKeyScopes, keyRecordsUnlikeAnswers, missingKeyRecords } from '../../bench/soak-key-records';
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

it('reports a charge answered otherwise than its record holds, field for field; other answers are not compared', async () => {
  const records = new KeyRecords(db.pool);
  const first = {
    status: 'succeeded',
    key: 'u1',
    updatedAt: '2026-12-04T16:06:44.024Z',
    wallet: { status: 'captured' },
  };
  await records.record({ merchantId: 'm', operation: 'charge', key: 'u1', fingerprint: 'f', view: first });
  const scope = 'charge:m:u1';
  const { compared, unlike, timeOnly } = await keyRecordsUnlikeAnswers(db.pool, [
    { scope, body: { ...first } },
    // A retried task's view with its own time: what a handoff before the task completed must never leave.
    { scope, body: { ...first, updatedAt: '2026-12-04T16:06:44.056Z' } },
    { scope, body: { ...first, wallet: { status: 'released' } } },
    // Not an answer for good (the payment goes on), and a key without a record: not compared here.
    { scope, body: { status: 'pending', key: 'u1' } },
    { scope: 'charge:m:none', body: { status: 'declined' } },
  ]);
  expect(compared).toBe(3);
  expect(unlike).toHaveLength(2);
  expect(unlike[0]).toContain('16:06:44.056Z');
  expect(unlike[1]).toContain('released');
  // Of them, the one that differs in its time alone is named as such too.
  expect(timeOnly).toEqual([unlike[0]]);
});
