/** One transaction per step, its failures classified by how far it got (src/db/errors.ts). */
import pg from 'pg';
import { type TransactionPhase, classifyDatabaseError, isDriverError } from './errors';

/**
 * A pooled connection with an error listener for as long as it is checked out: a connection that dies between two
 * statements (the server crashed) emits `error` on the client, which would otherwise crash the process; the statement
 * in flight or the next one fails and is classified. Returns the release that also removes the listener.
 */
async function checkout(pool: pg.Pool): Promise<{ client: pg.PoolClient; release(destroy?: boolean): void }> {
  const client = await pool.connect();
  const ignore = () => undefined;
  client.on('error', ignore);
  return {
    client,
    release: (destroy = false) => {
      client.off('error', ignore);
      client.release(destroy ? true : undefined);
    },
  };
}

/** What a step may run its statements on. */
export type Queryable = Pick<pg.PoolClient, 'query'>;

/**
 * Runs `work` in one transaction: BEGIN, `work`, COMMIT. A driver or server error becomes a classified
 * {@link DatabaseError} (nothing applied, or unknown when the COMMIT's answer was lost); an error of `work`'s own (a
 * refusal it decided) rolls back and passes through unchanged. A connection that failed is destroyed, not pooled.
 */
export async function inTransaction<T>(pool: pg.Pool, work: (client: Queryable) => Promise<T>): Promise<T> {
  let phase: TransactionPhase = 'connect';
  let conn: Awaited<ReturnType<typeof checkout>> | undefined;
  try {
    conn = await checkout(pool);
    phase = 'before_commit';
    await conn.client.query('BEGIN');
    const result = await work(conn.client);
    phase = 'commit';
    await conn.client.query('COMMIT');
    conn.release();
    return result;
  } catch (err) {
    const driver = isDriverError(err);
    if (conn !== undefined) {
      if (phase === 'before_commit' && (!driver || err instanceof pg.DatabaseError)) {
        // The caller's refusal or a statement the server refused: the connection is fine, the transaction just ends.
        const rolledBack = await conn.client.query('ROLLBACK').then(
          () => true,
          () => false,
        );
        conn.release(!rolledBack);
      } else {
        conn.release(true);
      }
    }
    throw driver ? classifyDatabaseError(err, phase) : err;
  }
}

/**
 * Runs `work`, one statement that is its own transaction (no BEGIN, no COMMIT: one round trip), e.g. a function that
 * locks, reads and writes. Its answer is its COMMIT's: a lost answer leaves it unknown, an error answer rolled it back; an
 * error of `work`'s own after the statement (a refusal it read) passes through unchanged, with nothing written.
 */
export function inStatement<T>(pool: pg.Pool, work: (client: Queryable) => Promise<T>): Promise<T> {
  return onConnection(pool, work, 'statement');
}

/** Runs reads on one pooled connection, outside a transaction; a driver or server error means nothing was read. */
export function withConnection<T>(pool: pg.Pool, work: (client: Queryable) => Promise<T>): Promise<T> {
  return onConnection(pool, work, 'before_commit');
}

/** `work` on one pooled connection, without BEGIN; a driver or server error is classified as failing at `phase`. */
async function onConnection<T>(
  pool: pg.Pool,
  work: (client: Queryable) => Promise<T>,
  phase: Exclude<TransactionPhase, 'connect'>,
): Promise<T> {
  let conn: Awaited<ReturnType<typeof checkout>>;
  try {
    conn = await checkout(pool);
  } catch (err) {
    throw isDriverError(err) ? classifyDatabaseError(err, 'connect') : err;
  }
  try {
    const result = await work(conn.client);
    conn.release();
    return result;
  } catch (err) {
    const driver = isDriverError(err);
    conn.release(driver && !(err instanceof pg.DatabaseError));
    throw driver ? classifyDatabaseError(err, phase) : err;
  }
}
