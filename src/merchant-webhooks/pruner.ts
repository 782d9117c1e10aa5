/**
 * The worker's periodic deletion of settled events (delivered, given up, discarded) older than the retention: the queue
 * table keeps them for redelivery and audit that long (`MERCHANT_WEBHOOK_RETENTION_DAYS`), then they go.
 */
import { startPeriodicPrune } from '../db';
import type { MerchantWebhookLog } from './activities';
import type { MerchantEventOutbox } from './outbox';

const dayMs = 86_400_000;

/** Prunes now and every `intervalMs` until stopped; a failed run is logged and tried again at the next interval. */
export function startMerchantEventPruner(
  outbox: MerchantEventOutbox,
  log: MerchantWebhookLog,
  retentionDays: number,
  intervalMs = 3_600_000,
): { stop(): Promise<void> } {
  const prune = () => outbox.prune(new Date(Date.now() - retentionDays * dayMs));
  return startPeriodicPrune(prune, log, 'settled merchant webhook events', intervalMs);
}
