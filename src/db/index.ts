/**
 * The payments database (PostgreSQL): wallets and their entries, key records. Processes open it once at start
 * ({@link openDatabase}: pool, migrations) and hand the pool to the ledger and the key-record repository.
 */
import type pg from 'pg';
import { isDatabaseError } from './errors';
import { migrate } from './migrate';
import { type DatabaseSettings, createPool } from './pool';

export * from './errors';
export * from './group-commit';
export * from './migrate';
export * from './order-claims';
export * from './periodic-prune';
export * from './pool';
export * from './transaction';

/** An open database: the process's pool, migrated. */
export interface Database {
  readonly pool: pg.Pool;
  /** The migrations this process applied at start (none when another process had, or the schema was current). */
  readonly applied: readonly string[];
  close(): Promise<void>;
}

/** Where {@link openDatabase} reports what it did. */
export interface DatabaseLog {
  info(fields: object, message: string): void;
  warn(fields: object, message: string): void;
}

/**
 * Opens the pool and applies pending migrations. A database that is not up yet (it starts beside us: compose, the
 * cluster, a restart) is waited for until `waitMs` (default 60 s); a migration that fails stops the start.
 */
export async function openDatabase(settings: DatabaseSettings, log: DatabaseLog, waitMs = 60_000): Promise<Database> {
  const pool = createPool(settings, (err) => log.warn({ err: err.message }, 'database: idle connection lost'));
  const deadline = Date.now() + waitMs;
  try {
    for (let delay = 250; ; delay = Math.min(delay * 2, 2_000)) {
      try {
        const applied = await migrate(pool);
        log.info({ applied }, applied.length > 0 ? 'database migrated' : 'database schema current');
        return { pool, applied, close: () => pool.end() };
      } catch (err) {
        if (!isDatabaseError(err) || Date.now() + delay > deadline) throw err;
        log.warn({ reason: err.reason }, 'database not reachable yet; waiting');
        await new Promise((r) => setTimeout(r, delay));
      }
    }
  } catch (err) {
    await pool.end().catch(() => undefined);
    throw err;
  }
}
