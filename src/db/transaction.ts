/** One transaction per step, its failures classified by how far it got (src/db/errors.ts). */
import pg from 'pg';
import { type TransactionPhase, classifyDatabaseError, isDriverError } from './errors';

/** What a step may run its statements on. */
export type Queryable = Pick<pg.PoolClient, 'query'>;

/**
 * Runs `work` in one transaction: BEGIN, `work`, COMMIT. A driver or server error becomes a classified
 * {@link DatabaseError} (nothing applied, or unknown when the COMMIT's answer was lost); an error of `work`'s own (a
 * refusal it decided) rolls back and passes through unchanged. A connection that failed is destroyed, not pooled.
 */
export async function inTransaction<T>(pool: pg.Pool, work: (client: Queryable) => Promise<T>): Promise<T> {
  let phase: TransactionPhase = 'connect';
  let client: pg.PoolClient | undefined;
  try {
    client = await pool.connect();
    phase = 'before_commit';
    await client.query('BEGIN');
    const result = await work(client);
    phase = 'commit';
    await client.query('COMMIT');
    client.release();
    return result;
  } catch (err) {
    const driver = isDriverError(err);
    if (client !== undefined) {
      if (phase === 'before_commit' && (!driver || err instanceof pg.DatabaseError)) {
        // The caller's refusal or a statement the server refused: the connection is fine, the transaction just ends.
        const rolledBack = await client.query('ROLLBACK').then(
          () => true,
          () => false,
        );
        client.release(rolledBack ? undefined : true);
      } else {
        client.release(true);
      }
    }
    throw driver ? classifyDatabaseError(err, phase) : err;
  }
}

/** Runs reads on one pooled connection, outside a transaction; a driver or server error means nothing was read. */
export async function withConnection<T>(pool: pg.Pool, work: (client: Queryable) => Promise<T>): Promise<T> {
  let client: pg.PoolClient;
  try {
    client = await pool.connect();
  } catch (err) {
    throw isDriverError(err) ? classifyDatabaseError(err, 'connect') : err;
  }
  try {
    const result = await work(client);
    client.release();
    return result;
  } catch (err) {
    const driver = isDriverError(err);
    client.release(driver && !(err instanceof pg.DatabaseError));
    throw driver ? classifyDatabaseError(err, 'before_commit') : err;
  }
}
