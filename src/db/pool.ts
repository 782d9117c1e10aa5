/**
 * The connection pool of a process: `pg` with server-side bounds on every statement, lock wait and idle transaction,
 * and a client-side bound on every answer, so a stuck database ends as a classified error, never a hung activity.
 */
import pg from 'pg';

/** How a process reaches the database (config `DATABASE_URL`, `DATABASE_POOL_SIZE`, `DATABASE_STATEMENT_TIMEOUT_MS`). */
export interface DatabaseSettings {
  readonly url: string;
  /** Connections of this process (default 10). */
  readonly poolSize?: number;
  /** Server-side bound on one statement, lock waits included (default 5 s). */
  readonly statementTimeoutMs?: number;
  /** How long a caller waits for a pooled or new connection (default 2 s). */
  readonly connectTimeoutMs?: number;
  /** Shown in `pg_stat_activity` (default `payment-workflows`). */
  readonly applicationName?: string;
}

export const defaultStatementTimeoutMs = 5_000;

/** A pool whose idle connections' errors (the server restarted) are reported, never thrown at the process. */
export function createPool(settings: DatabaseSettings, onIdleError: (err: Error) => void = () => undefined): pg.Pool {
  const statementTimeoutMs = settings.statementTimeoutMs ?? defaultStatementTimeoutMs;
  const pool = new pg.Pool({
    connectionString: settings.url,
    max: settings.poolSize ?? 10,
    connectionTimeoutMillis: settings.connectTimeoutMs ?? 2_000,
    idleTimeoutMillis: 30_000,
    statement_timeout: statementTimeoutMs,
    // A transaction left open by a process that froze between statements releases its row locks.
    idle_in_transaction_session_timeout: statementTimeoutMs * 2,
    // The client's own bound, past the server's: a server that stopped answering is a lost connection.
    query_timeout: statementTimeoutMs + 1_000,
    application_name: settings.applicationName ?? 'payment-workflows',
    keepAlive: true,
  });
  pool.on('error', onIdleError);
  // Every connection keeps a listener for its whole life: a server that dies while a connection is between the pool's
  // hand-over and the transaction's own listener (or in any other gap) must fail the statement, which is classified,
  // never emit an unhandled `error` that ends the process (CI saw it once under the crash-and-restart test).
  pool.on('connect', (client) => client.on('error', () => undefined));
  return pool;
}
