/** The worker's periodic pruning of expired key records (every worker prunes; a DELETE of expired rows is idempotent). */
import type { KeyRecords } from './repository';

/** Where the pruner reports. */
export interface PrunerLog {
  info(fields: object, message: string): void;
  warn(fields: object, message: string): void;
}

/**
 * Prunes now and every `intervalMs` (default an hour) until stopped. A failed run (database away) is logged and tried
 * again at the next interval: expired records answer nothing meanwhile ({@link KeyRecords.find} checks the expiry).
 */
export function startKeyRecordPruner(
  records: KeyRecords,
  log: PrunerLog,
  intervalMs = 3_600_000,
): { stop(): Promise<void> } {
  let running: Promise<void> = Promise.resolve();
  const run = () => {
    running = records.prune().then(
      (pruned) => {
        if (pruned > 0) log.info({ pruned }, 'key records pruned');
      },
      (err: unknown) =>
        log.warn({ err: err instanceof Error ? err.message : String(err) }, 'key record pruning failed'),
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
