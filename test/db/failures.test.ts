/**
 * Database failures are classified like provider outcomes, on a real PostgreSQL: refused before the statement =
 * nothing applied (retry is safe); the answer to a COMMIT lost = unknown, settled by reading the operation id back.
 */
import type pg from 'pg';
import { WalletFailure } from '../../src/domain/wallet-errors';
import { createPool, inTransaction, type DatabaseError } from '../../src/db';
import { WalletLedger } from '../../src/wallets';
import { openTestDatabase } from '../helpers/database';
import { eventually } from '../helpers/eventually';
import { refusedPort } from '../helpers/net';
import { type CommitCuttingProxy, startCommitCuttingProxy } from '../helpers/commit-cutting-proxy';

let db: Awaited<ReturnType<typeof openTestDatabase>>;
beforeAll(async () => {
  db = await openTestDatabase();
});
afterAll(() => db.drop());

const failureOf = (p: Promise<unknown>) =>
  p.then(
    () => undefined,
    (err: DatabaseError) => ({ type: err.type, reason: err.reason }),
  );

it('classifies a refused connection and an exhausted pool as not applied', async () => {
  const refused = createPool({ url: `postgres://postgres@127.0.0.1:${await refusedPort()}/x`, connectTimeoutMs: 500 });
  const one = createPool({ url: db.url, poolSize: 1, connectTimeoutMs: 200 });
  // The pool's one connection, held so the next caller waits for it: 200 ms is short for opening it on a loaded
  // machine (seen once in a full run: "Connection terminated due to connection timeout" here, before any check), so
  // it is tried until it opens; what is checked is the wait below, not this.
  const busy = await eventually('the pool’s one connection', () => one.connect().catch(() => undefined), 20_000, 50);
  try {
    expect(await failureOf(inTransaction(refused, (c) => c.query('SELECT 1')))).toEqual({
      type: WalletFailure.DatabaseNotApplied,
      reason: 'connect_failed',
    });
    expect(await failureOf(inTransaction(one, (c) => c.query('SELECT 1')))).toEqual({
      type: WalletFailure.DatabaseNotApplied,
      reason: 'pool_timeout',
    });
  } finally {
    busy.release();
    await Promise.all([refused.end(), one.end()]);
  }
});

it('classifies a statement timeout inside the transaction as not applied, and nothing was', async () => {
  const pool = createPool({ url: db.url, statementTimeoutMs: 200 });
  try {
    const failure = await failureOf(
      inTransaction(pool, async (c) => {
        await c.query(`CREATE TABLE IF NOT EXISTS t_timeout (x int)`);
        await c.query('INSERT INTO t_timeout VALUES (1)');
        await c.query('SELECT pg_sleep(1)');
      }),
    );
    expect(failure).toEqual({ type: WalletFailure.DatabaseNotApplied, reason: 'statement_timeout' });
    expect((await pool.query(`SELECT to_regclass('t_timeout') AS t`)).rows[0]).toEqual({ t: null });
  } finally {
    await pool.end();
  }
});

/** A ledger whose connections go through a {@link startCommitCuttingProxy}; `outcomes` as its observer heard them. */
async function behindCuttingProxy<T>(
  test: (ctx: { proxy: CommitCuttingProxy; pool: pg.Pool; ledger: WalletLedger; outcomes: string[] }) => Promise<T>,
): Promise<T> {
  const url = new URL(db.url);
  const proxy = await startCommitCuttingProxy({ host: url.hostname, port: Number(url.port) });
  url.port = String(proxy.port);
  const pool = createPool({ url: url.toString() });
  const outcomes: string[] = [];
  const ledger = new WalletLedger(pool, { onOperation: (kind, outcome) => void outcomes.push(`${kind}:${outcome}`) });
  try {
    return await test({ proxy, pool, ledger, outcomes });
  } finally {
    await pool.end();
    await proxy.close();
  }
}

it('classifies a one-statement hold that timed out waiting for the wallet as not applied, and nothing was', async () => {
  const pool = createPool({ url: db.url, statementTimeoutMs: 200 });
  const ledger = new WalletLedger(pool);
  const hold = {
    merchantId: 'm1',
    walletId: 'w-timeout',
    paymentKey: 'p-timeout',
    amount: 300,
    currency: 'EUR' as const,
  };
  const holder = await db.pool.connect();
  try {
    await ledger.credit('m1', 'w-timeout', 'fund-timeout', { amount: { value: 1_000, currency: 'EUR' } });
    await holder.query('BEGIN');
    await holder.query(`SELECT 1 FROM wallets WHERE merchant_id = 'm1' AND wallet_id = 'w-timeout' FOR UPDATE`);
    const failure = await failureOf(ledger.hold(hold));
    await holder.query('ROLLBACK');

    expect(failure).toEqual({ type: WalletFailure.DatabaseNotApplied, reason: 'statement_timeout' });
    expect(await ledger.get('m1', 'w-timeout')).toMatchObject({ balance: 1_000, held: 0 });
  } finally {
    holder.release();
    await pool.end();
  }
});

it('classifies a COMMIT whose answer was lost as unknown; the retry reads the credit back and applies nothing more', () =>
  behindCuttingProxy(async ({ proxy, pool, ledger, outcomes }) => {
    const credit = { amount: { value: 1_000, currency: 'EUR' as const } };
    proxy.armed = true;
    const failure = await failureOf(ledger.credit('m1', 'w-lost', 'fund', credit));
    const retried = await ledger.credit('m1', 'w-lost', 'fund', credit);

    expect(proxy.cut).toBe(1);
    expect(failure).toEqual({ type: WalletFailure.DatabaseOutcomeUnknown, reason: 'commit_unanswered' });
    // It had committed: the retry finds it and answers as the first attempt would have.
    expect(retried).toMatchObject({ replayed: true, wallet: { balance: 1_000, available: 1_000 } });
    expect(outcomes).toEqual(['credit:DatabaseOutcomeUnknown', 'credit:replayed']);
    const credits = await pool.query(`SELECT 1 FROM wallet_entries WHERE kind = 'credit' AND wallet_id = 'w-lost'`);
    expect(credits.rowCount).toBe(1);
  }));

// A hold, a capture and a debit are each one statement that is its own transaction (no BEGIN, no COMMIT): the answer
// to that statement is its COMMIT's.
it.each([
  ['hold', 'wallet_hold(', ['hold'], { status: 'held', replayed: true, wallet: { balance: 1_000, held: 300 } }],
  [
    'capture',
    'wallet_settle(',
    ['hold', 'capture'],
    { replayed: true, amount: 300, wallet: { balance: 700, held: 0 } },
  ],
  ['debit', 'wallet_debit(', ['hold', 'capture'], { status: 'captured', replayed: true, wallet: { balance: 700 } }],
] as const)(
  'classifies a one-statement %s whose answer was lost as unknown; the retry reads it back',
  (kind, statement, entriesAfter, replayed) =>
    behindCuttingProxy(async ({ proxy, pool, ledger, outcomes }) => {
      const walletId = `w-lost-${kind}`;
      const args = { merchantId: 'm1', walletId, paymentKey: `p-lost-${kind}`, amount: 300, currency: 'EUR' as const };
      await ledger.credit('m1', walletId, `fund-${kind}`, { amount: { value: 1_000, currency: 'EUR' } });
      if (kind === 'capture') await ledger.hold(args);
      const step = () =>
        kind === 'hold' ? ledger.hold(args) : kind === 'capture' ? ledger.capture(args) : ledger.debit(args);
      proxy.cutText = statement;
      proxy.armed = true;
      const failure = await failureOf(step());
      const retried = await step();

      expect(proxy.cut).toBe(1);
      expect(failure).toEqual({ type: WalletFailure.DatabaseOutcomeUnknown, reason: 'commit_unanswered' });
      expect(retried).toMatchObject(replayed);
      expect(outcomes.slice(-2)).toEqual([`${kind}:DatabaseOutcomeUnknown`, `${kind}:replayed`]);
      const entries = await pool.query<{ kind: string }>(
        'SELECT kind FROM wallet_entries WHERE wallet_id = $1 ORDER BY seq',
        [walletId],
      );
      expect(entries.rows.map((r) => r.kind)).toEqual(['credit', ...entriesAfter]);
    }),
);
