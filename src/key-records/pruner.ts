/** The worker's periodic pruning of expired key records. */
import { type PrunerLog, startPeriodicPrune } from '../db';
import type { KeyRecords } from './repository';

export type { PrunerLog };

/**
 * Prunes now and every `intervalMs` (default an hour) until stopped. A failed run (database away) is tried again at the
 * next interval: expired records answer nothing meanwhile ({@link KeyRecords.find} checks the expiry).
 */
export function startKeyRecordPruner(
  records: KeyRecords,
  log: PrunerLog,
  intervalMs = 3_600_000,
): { stop(): Promise<void> } {
  return startPeriodicPrune(() => records.prune(), log, 'key records', intervalMs);
}
