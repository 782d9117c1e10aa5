/**
 * Group commit (src/db/group-commit.ts) on a real PostgreSQL: steps of one key that wait at the same time share one
 * transaction, each keeps the answer it would have had alone (its own refusal, a statement the server refused), and a
 * batch whose connection breaks or whose COMMIT fails applies nothing of any step. Batches are made deterministic by
 * a first step that holds its transaction open until the others are queued behind it.
 */
import { randomUUID } from 'node:crypto';
import { GroupCommit, type Queryable, isDatabaseError } from '../../src/db';
import { WalletFailure } from '../../src/domain/wallet-errors';
import { WalletLedger } from '../../src/wallets';
import { openTestDatabase } from '../helpers/database';

let db: Awaited<ReturnType<typeof openTestDatabase>>;
/** Connections checked out of the pool so far: one per transaction. */
let checkouts = 0;

beforeAll(async () => {
  db = await openTestDatabase({ poolSize: 8 });
  db.pool.on('acquire', () => void (checkouts += 1));
  await db.pool.query('CREATE TABLE scratch (k text NOT NULL, v text NOT NULL)');
  // Checked at COMMIT only: two steps of one batch that insert the same value fail the COMMIT, not a statement.
  await db.pool.query(
    'CREATE TABLE deferred (v text NOT NULL, CONSTRAINT deferred_v UNIQUE (v) DEFERRABLE INITIALLY DEFERRED)',
  );
});
afterAll(() => db.drop());

/** Scratch rows of `key`, as committed. */
const rowsOf = async (key: string) =>
  (await db.pool.query<{ v: string }>('SELECT v FROM scratch WHERE k = $1 ORDER BY v', [key])).rows.map((r) => r.v);

/**
 * Runs `steps` as one batch: a first step of the key holds its transaction open until every other step is queued,
 * so they all wait for it and then share the next transaction. Answers each step's settled result.
 */
async function batch(key: string, steps: ((q: Queryable) => Promise<unknown>)[]) {
  const gc = GroupCommit.of(db.pool);
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  let running!: () => void;
  const started = new Promise<void>((r) => (running = r));
  const first = gc.run(key, async (q) => {
    running();
    await gate;
    return q.query('SELECT 1');
  });
  await started; // its connection checked out, its transaction open
  const before = checkouts;
  const results = Promise.allSettled(steps.map((s) => gc.run(key, s)));
  release();
  await first;
  const settled = await results;
  return { settled, transactions: checkouts - before };
}

describe('group commit', () => {
  it('steps of one key that wait at the same time share one transaction; each answers its own result', async () => {
    const key = randomUUID();
    const { settled, transactions } = await batch(
      key,
      ['a', 'b', 'c', 'd', 'e'].map(
        (v) => (q: Queryable) => q.query('INSERT INTO scratch VALUES ($1, $2)', [key, v]).then(() => v),
      ),
    );
    expect(settled).toEqual(['a', 'b', 'c', 'd', 'e'].map((value) => ({ status: 'fulfilled', value })));
    expect(transactions).toBe(1); // one for the five, after the gate's own
    expect(await rowsOf(key)).toEqual(['a', 'b', 'c', 'd', 'e']);
  });

  it('a step that refuses, or whose statement the server refuses, fails alone: the steps around it commit', async () => {
    const key = randomUUID();
    const own = new Error('refused by the step itself');
    const { settled } = await batch(key, [
      (q) => q.query('INSERT INTO scratch VALUES ($1, $2)', [key, 'before']),
      async (q) => {
        await q.query('INSERT INTO scratch VALUES ($1, $2)', [key, 'rolled back with its refusal']);
        throw own;
      },
      async (q) => {
        await q.query('INSERT INTO scratch VALUES ($1, $2)', [key, 'rolled back with its statement']);
        return q.query('SELECT 1 / 0');
      },
      (q) => q.query('INSERT INTO scratch VALUES ($1, $2)', [key, 'after']),
    ]);
    expect(settled.map((s) => s.status)).toEqual(['fulfilled', 'rejected', 'rejected', 'fulfilled']);
    expect((settled[1] as PromiseRejectedResult).reason).toBe(own); // passed through unchanged, as alone
    const refused = (settled[2] as PromiseRejectedResult).reason as unknown;
    expect(isDatabaseError(refused) && refused.type).toBe(WalletFailure.DatabaseNotApplied);
    expect(await rowsOf(key)).toEqual(['after', 'before']);
  });

  it('a connection that breaks in the middle of a batch applies nothing of it, and every step says so', async () => {
    const key = randomUUID();
    const { settled } = await batch(key, [
      (q) => q.query('INSERT INTO scratch VALUES ($1, $2)', [key, 'first']),
      (q) => q.query('SELECT pg_terminate_backend(pg_backend_pid())'),
      (q) => q.query('INSERT INTO scratch VALUES ($1, $2)', [key, 'never']),
    ]);
    for (const s of settled) {
      expect(s.status).toBe('rejected');
      const reason = (s as PromiseRejectedResult).reason as unknown;
      expect(isDatabaseError(reason) && [reason.type, reason.reason]).toEqual([
        WalletFailure.DatabaseNotApplied,
        'connection_lost',
      ]);
    }
    expect(await rowsOf(key)).toEqual([]);
  });

  it('a COMMIT that fails fails every step that had not refused by itself; nothing is applied', async () => {
    const key = randomUUID();
    const own = new Error('refused by the step itself');
    const value = `v-${randomUUID()}`;
    const { settled } = await batch(key, [
      (q) => q.query('INSERT INTO deferred VALUES ($1)', [value]),
      () => Promise.reject(own),
      (q) => q.query('INSERT INTO deferred VALUES ($1)', [value]), // the COMMIT's unique check fails
    ]);
    expect(settled.map((s) => s.status)).toEqual(['rejected', 'rejected', 'rejected']);
    expect((settled[1] as PromiseRejectedResult).reason).toBe(own);
    for (const i of [0, 2]) {
      const reason = (settled[i] as PromiseRejectedResult).reason as unknown;
      expect(isDatabaseError(reason) && [reason.type, reason.reason]).toEqual([
        WalletFailure.DatabaseNotApplied,
        'rolled_back',
      ]);
    }
    expect((await db.pool.query('SELECT 1 FROM deferred WHERE v = $1', [value])).rowCount).toBe(0);
  });

  it('keys do not wait for each other', async () => {
    const gc = GroupCommit.of(db.pool);
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const held = gc.run('held', async () => gate);
    // Another key's step commits while the first key's transaction is still open.
    await expect(gc.run(randomUUID(), (q) => q.query('SELECT 1').then(() => 'done'))).resolves.toBe('done');
    release();
    await held;
  });
});

describe('wallet steps grouped', () => {
  it('concurrent holds on one wallet: fewer transactions than holds, each hold once, available never below 0', async () => {
    const ledger = new WalletLedger(db.pool);
    const walletId = `w-${randomUUID().slice(0, 8)}`;
    await ledger.credit('m', walletId, `fund-${walletId}`, { amount: { value: 550, currency: 'EUR' } });
    const keys = Array.from({ length: 12 }, (_, i) => `p-${i}`);
    const before = checkouts;
    // Two holds per key at once: one applies, its twin replays it (same transaction or the next).
    const results = await Promise.all(
      [...keys, ...keys].map((paymentKey) =>
        ledger.hold({ merchantId: 'm', walletId, paymentKey, amount: 100, currency: 'EUR' }),
      ),
    );
    expect(checkouts - before).toBeLessThan(keys.length * 2);
    const applied = results.filter((r) => r.status === 'held' && !r.replayed);
    expect(applied).toHaveLength(5);
    const wallet = await ledger.get('m', walletId);
    expect(wallet).toMatchObject({ balance: 550, held: 500, available: 50 });
    const { rows } = await db.pool.query<{ n: string }>(
      "SELECT count(*) AS n FROM wallet_entries WHERE wallet_id = $1 AND kind = 'hold'",
      [walletId],
    );
    expect(Number(rows[0]?.n)).toBe(5);
  });
});
