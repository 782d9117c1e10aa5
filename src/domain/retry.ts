/**
 * Retry policies: the zod schemas of their shapes (configuration and workflow inputs parse with these; activities
 * read heartbeat details with {@link AttemptRecord}) and, re-exported, everything of `retry-policy.ts`, the zod-free
 * part that workflow code runs.
 */
import { z } from 'zod';
import {
  type AttemptRecord as AttemptRecordShape,
  type OperationRetrySpec,
  type ProviderOperation as ProviderOperationName,
  type RetryCapabilities,
  type RetryOverrides,
  type RetrySpec as RetrySpecShape,
  noAttempts,
  providerOperations,
  retrySpecFor,
  retrySpecRuleMessages,
} from './retry-policy';

export * from './retry-policy';

/** The provider operations an activity performs; each has its own retry preset. */
export const ProviderOperation = z.enum(providerOperations);
export type ProviderOperation = ProviderOperationName;

const Ms = z.number().int().positive().max(Number.MAX_SAFE_INTEGER);

/** The fields of a {@link RetrySpec} without its cross-field checks (for partial overrides). */
export const RetrySpecFields = z.object({
  initialIntervalMs: Ms,
  backoffCoefficient: z.number().min(1).max(100),
  maximumIntervalMs: Ms,
  jitter: z.enum(['full', 'none']),
  budgetMs: Ms,
  attemptTimeoutMs: Ms,
  maximumAttempts: z.number().int().positive().optional(),
  /** How long the server waits for a heartbeat before it gives the attempt up (default: derived, see toActivityOptions). */
  heartbeatTimeoutMs: Ms.optional(),
});

/**
 * A typed retry policy (see the `RetrySpec` type in retry-policy.ts): the same rules as `retrySpecIssues`, which
 * workflow code uses instead of this schema.
 */
export const RetrySpec = RetrySpecFields.refine((s) => s.maximumIntervalMs >= s.initialIntervalMs, {
  message: retrySpecRuleMessages.intervals,
  path: ['maximumIntervalMs'],
}).refine((s) => s.attemptTimeoutMs <= s.budgetMs, {
  message: retrySpecRuleMessages.attemptFits,
  path: ['attemptTimeoutMs'],
});
export type RetrySpec = RetrySpecShape;

/** Heartbeat details of an activity attempt (see the `AttemptRecord` type in retry-policy.ts). */
export const AttemptRecord = z.object({
  everSent: z.boolean(),
  everUnknown: z.boolean(),
  inFlight: z.boolean(),
  sends: z.number().int().nonnegative().optional(),
  closedBy: z.number().int().positive().optional(),
});
export type AttemptRecord = AttemptRecordShape;

// The schemas and the zod-free types describe the same values (a compile error here means they drifted apart).
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const sameShapes: [
  Same<z.infer<typeof RetrySpec>, RetrySpecShape>,
  Same<z.infer<typeof AttemptRecord>, AttemptRecordShape>,
  Same<z.infer<typeof ProviderOperation>, ProviderOperationName>,
] = [true, true, true];
void sameShapes;

/**
 * The record attempt `attempt` starts from: what the earlier ones left (anything unreadable counts as nothing, as on a
 * first attempt). It counts one more possible send with an unknown outcome when the attempt right before this one did
 * not close the record: a write still in flight at its last heartbeat, or an attempt that ended without a word (its
 * worker died between a send and a heartbeat that would have said so, or it timed out). Only a record closed by the
 * attempt right before proves what that attempt did; a later attempt with no record at all follows attempts that
 * recorded nothing, so nothing they did is proven either.
 */
export const carriedAttemptRecord = (heartbeatDetails: unknown, attempt: number): AttemptRecord => {
  const parsed = AttemptRecord.safeParse(heartbeatDetails);
  const earlier = parsed.success ? parsed.data : noAttempts;
  const open = earlier.inFlight || (attempt > 1 && earlier.closedBy !== attempt - 1);
  return {
    everSent: earlier.everSent || open,
    everUnknown: earlier.everUnknown || open,
    inFlight: false,
    sends: (earlier.sends ?? (earlier.everSent ? 1 : 0)) + (open ? 1 : 0),
  };
};

/** An operation whose retry spec cannot run against a provider, and {@link retrySpecFor}'s refusal of it. */
export interface RetryPresetRefusal {
  readonly operation: ProviderOperationName;
  readonly message: string;
  readonly cause: unknown;
}

/**
 * A worker's retry presets (`RETRY_*`) against one provider's capabilities, every operation checked: the spec each runs
 * with, and the operations whose spec {@link retrySpecFor} refuses (which in workflow code would fail a payment before
 * anything is sent). The configuration and the workers check presets with this, each at its own boundary.
 */
export const checkRetryPresets = (
  capabilities: RetryCapabilities,
  retry: RetryOverrides | undefined,
): {
  readonly specs: Partial<Record<ProviderOperationName, OperationRetrySpec>>;
  readonly refusals: readonly RetryPresetRefusal[];
} => {
  const specs: Partial<Record<ProviderOperationName, OperationRetrySpec>> = {};
  const refusals: RetryPresetRefusal[] = [];
  for (const operation of providerOperations) {
    try {
      specs[operation] = retrySpecFor(operation, capabilities, retry?.[operation]);
    } catch (err) {
      refusals.push({ operation, message: err instanceof Error ? err.message : String(err), cause: err });
    }
  }
  return { specs, refusals };
};
