/** A table's periodic pruning by every worker (a DELETE of expired rows is idempotent, so workers never coordinate). */
import type pg from 'pg';
import { withConnection } from './transaction';

/** Where a pruner reports. */
export interface PrunerLog {
  info(fields: object, message: string): void;
  warn(fields: object, message: string): void;
}

/**
 * Runs `prune` (answers how many rows went) now and every `intervalMs` until stopped; `what` names the rows in its log
 * lines. A failed run (the database away) is logged and tried again at the next interval.
 */
export function startPeriodicPrune(
  prune: () => Promise<number>,
  log: PrunerLog,
  what: string,
  intervalMs: number,
): { stop(): Promise<void> } {
  let running: Promise<void> = Promise.resolve();
  const run = () => {
    running = prune().then(
      (pruned) => void (pruned > 0 && log.info({ pruned }, `${what} pruned`)),
      (err: unknown) => log.warn({ err: err instanceof Error ? err.message : String(err) }, `${what} pruning failed`),
    );
  };
  run();
  const timer = setInterval(run, intervalMs);
  timer.unref();
  return {
    async stop() {
      clearInterval(timer);
      await running;
    },
  };
}

/**
 * Runs `sql`, a DELETE whose last parameter is its batch's LIMIT (after `params`), until a batch deletes fewer than
 * `batchSize` rows: short statements, no long lock, no statement timeout. Answers how many rows went.
 */
export async function deleteInBatches(
  pool: pg.Pool,
  sql: string,
  params: readonly unknown[],
  batchSize: number,
): Promise<number> {
  let total = 0;
  for (;;) {
    const { rowCount } = await withConnection(pool, (db) => db.query(sql, [...params, batchSize]));
    total += rowCount ?? 0;
    if ((rowCount ?? 0) < batchSize) return total;
  }
}
