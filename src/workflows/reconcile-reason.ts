/**
 * What a reconcile that ends in review tells the operator: how many checks over how long, which look-ups found nothing
 * and which could not ask the provider at all, and whether its resubmission left or was refused here before sending.
 */
import { formatWait } from '../domain/summaries';

/** What a reconcile's checks and its resubmission did. */
export interface ReconcileTally {
  checks: number;
  /** Look-ups the provider answered without the write. */
  notFound: number;
  /** Look-ups that failed (the provider unreachable or refusing for the look-up's whole budget). */
  failedLookups: number;
  /** The last failed look-up's failure type, e.g. `ProviderUnavailable`. */
  lastLookupFailure?: string;
  /** Checked past the schedule, while the look-ups failed, until the provider's key lifetime ended. */
  untilKeyLifetime: boolean;
  /** The resubmission with the same key, if one was made: its requests that may have left, and why none did. */
  resubmission?: { readonly sends: number; readonly refusedWhy?: string; readonly unprocessed?: boolean };
  /** Resubmissions refused here before they left, or answered by the provider without being processed. */
  refusedResubmissions?: number;
  /** Resubmissions whose requests may have left and whose outcome stayed unknown (absent: one, if any). */
  unknownResubmissions?: number;
  /** Resubmitted past the schedule, each refused here, until one more would not fit in the provider's key lifetime. */
  refusedUntilKeyLifetime?: boolean;
}

const counted = (n: number, noun: string) => `${n} ${noun}${n === 1 ? '' : 's'}`;

/**
 * The review reason of a reconcile that found nothing: e.g. `create not found at simulator after 2 checks over 1 h:
 * 2 look-ups found nothing; the resubmission with the same key was refused here before sending (breaker_open): nothing
 * was sent`. "Not confirmed" instead of "not found" when a look-up could not ask the provider.
 */
export function reconcileReviewReason(
  operation: string,
  provider: string,
  tally: ReconcileTally,
  elapsedMs: number,
): string {
  const verdict = tally.failedLookups > 0 ? 'not confirmed' : 'not found';
  const head = `${operation} ${verdict} at ${provider} after ${counted(tally.checks, 'check')} over ${formatWait(elapsedMs)}`;
  const parts: string[] = [];
  if (tally.notFound > 0) parts.push(`${counted(tally.notFound, 'look-up')} found nothing`);
  if (tally.failedLookups > 0) {
    const last = tally.untilKeyLifetime ? ", the last at the end of the provider's key lifetime" : '';
    parts.push(`${counted(tally.failedLookups, 'look-up')} failed (${tally.lastLookupFailure ?? 'unknown'})${last}`);
  }
  const resubmission = tally.resubmission;
  if (resubmission !== undefined) {
    const refused = tally.refusedResubmissions ?? 1;
    const times = refused > 1 ? ` ${refused} times` : '';
    const last = tally.refusedUntilKeyLifetime ? ", the last as late as the provider's key lifetime allows" : '';
    parts.push(
      resubmission.sends === 0
        ? `the resubmission with the same key was refused here before sending${times} (${resubmission.refusedWhy ?? 'not_sent'})${last}: nothing was sent`
        : resubmission.unprocessed === true
          ? `the resubmission with the same key was refused${times}, the last by the provider without processing it (${resubmission.refusedWhy ?? 'provider_unavailable'})${last}: nothing took effect`
          : (tally.unknownResubmissions ?? 1) > 1
            ? `${tally.unknownResubmissions} resubmissions with the same key were sent, their outcomes unknown`
            : 'one resubmission with the same key was sent, its outcome unknown',
    );
  }
  return parts.length === 0 ? head : `${head}: ${parts.join('; ')}`;
}
