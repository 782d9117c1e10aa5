/**
 * Retry policies without zod: the part of `retry.ts` that workflow code runs (activity options, the spec of each
 * operation, its validation). Workflow code imports this module, never `retry.ts`: every module in the workflow bundle
 * is evaluated again for each workflow the worker creates, and zod with its schemas costs milliseconds of CPU and a
 * share of the memory of each one. `retry.ts` re-exports all of it beside the zod schemas of the same shapes (the
 * configuration and the workflow inputs parse with those), and test/domain/zod-free.test.ts holds the two to the same
 * verdicts.
 */
import { ApplicationFailure, type ActivityOptions } from '@temporalio/common';
import { ErrorType } from './errors';

/** The provider operations an activity performs; each has its own retry preset. */
export const providerOperations = ['create', 'capture', 'void', 'refund', 'lookup', 'list'] as const;
export type ProviderOperation = (typeof providerOperations)[number];

/** The write operations: they move money, so repeating one is only safe when the provider honours keys. */
export const writeOperations = ['create', 'capture', 'void', 'refund'] as const satisfies readonly ProviderOperation[];

/** A write against a provider: its outcome is what a reconcile checks, and an idempotency key is scoped to it. */
export type WriteOperation = (typeof writeOperations)[number];

/**
 * How dangerous it is to repeat a call. `read`: always safe. `idempotent-write`: safe while the provider remembers the
 * key. `non-idempotent-write`: a repeat after an unknown outcome may be a second effect, so it is never blind.
 */
export type OperationSafety = 'read' | 'idempotent-write' | 'non-idempotent-write';

/**
 * What bounds the calls one attempt makes, as the provider's client enforces it: every call ends (answered or
 * classified) within `callTimeoutMs`, and a look-up by reference reads at most `referencePages` pages.
 */
export interface CallLimits {
  readonly callTimeoutMs: number;
  readonly referencePages: number;
}

/** Pages of 100 a look-up by reference reads at most (an order id with more payments than that is not ours to guess). */
export const defaultReferenceLookupPages = 5;

/** Slack per attempt for what is not a provider call: breaker, classification, heartbeats, the log line. */
export const attemptOverheadMs = 1_000;

/**
 * The longest wait a provider's Retry-After may ask of us by default (`PROVIDER_MAX_RETRY_AFTER_MS`): one answer asking
 * for minutes or hours would otherwise hold every write to the provider that long (the provider-wide cool-down) and
 * outlast every operation's budget.
 */
export const defaultMaxRetryAfterMs = 60_000;

/** The capability flags the retry layer needs; `ProviderCapabilities` (src/providers/types.ts) satisfies it. */
export interface RetryCapabilities {
  readonly idempotencyKeys: boolean;
  readonly keyTtlSeconds: number | null;
  readonly lookupByKey?: boolean;
  /**
   * The client's limits. Absent (a history recorded before providers reported them): the attempt timeout is taken as
   * configured, so replays schedule exactly what they scheduled.
   */
  readonly callLimits?: CallLimits;
}

/**
 * A typed retry policy: backoff, jitter and a deadline. `budgetMs` is the whole operation's deadline (Temporal's
 * schedule-to-close), `attemptTimeoutMs` one attempt's (start-to-close) and must cover every call one attempt can make
 * ({@link minAttemptTimeoutMs}), so every attempt ends in a classified outcome rather than being cut off. Durations are
 * positive safe integers of milliseconds; {@link retrySpecIssues} checks a value against all of it.
 */
export interface RetrySpec {
  initialIntervalMs: number;
  /** In [1, 100]. */
  backoffCoefficient: number;
  maximumIntervalMs: number;
  jitter: 'full' | 'none';
  budgetMs: number;
  attemptTimeoutMs: number;
  maximumAttempts?: number | undefined;
  /** How long the server waits for a heartbeat before it gives the attempt up (default: derived, see toActivityOptions). */
  heartbeatTimeoutMs?: number | undefined;
}

/** The fields of a {@link RetrySpec}, in order. */
export const retrySpecKeys = [
  'initialIntervalMs',
  'backoffCoefficient',
  'maximumIntervalMs',
  'jitter',
  'budgetMs',
  'attemptTimeoutMs',
  'maximumAttempts',
  'heartbeatTimeoutMs',
] as const satisfies readonly (keyof RetrySpec)[];

/** The cross-field rules of a {@link RetrySpec}: what they say when broken (the zod schema says the same). */
export const retrySpecRuleMessages = {
  intervals: 'maximumIntervalMs must be at least initialIntervalMs',
  attemptFits: 'attemptTimeoutMs must not exceed budgetMs: not even one attempt would fit',
} as const;

/** One thing wrong with a retry spec: the field and why. */
export interface RetrySpecIssue {
  readonly path: keyof RetrySpec;
  readonly message: string;
}

const isMs = (v: unknown): v is number => Number.isSafeInteger(v) && (v as number) > 0;

/**
 * What is wrong with `value` as a {@link RetrySpec}; empty when nothing is. The field rules first; the cross-field
 * rules only once every field is right.
 */
export function retrySpecIssues(value: unknown): RetrySpecIssue[] {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return [{ path: 'initialIntervalMs', message: 'a retry spec must be an object' }];
  }
  const s = value as Record<string, unknown>;
  const issues: RetrySpecIssue[] = [];
  const ms = (path: keyof RetrySpec, optional = false) => {
    if (optional && s[path] === undefined) return;
    if (!isMs(s[path])) issues.push({ path, message: `${path} must be a positive integer of milliseconds` });
  };
  ms('initialIntervalMs');
  const coefficient = s.backoffCoefficient;
  if (typeof coefficient !== 'number' || !Number.isFinite(coefficient) || coefficient < 1 || coefficient > 100) {
    issues.push({ path: 'backoffCoefficient', message: 'backoffCoefficient must be a number from 1 to 100' });
  }
  ms('maximumIntervalMs');
  if (s.jitter !== 'full' && s.jitter !== 'none') {
    issues.push({ path: 'jitter', message: "jitter must be 'full' or 'none'" });
  }
  ms('budgetMs');
  ms('attemptTimeoutMs');
  if (
    s.maximumAttempts !== undefined &&
    !(Number.isSafeInteger(s.maximumAttempts) && (s.maximumAttempts as number) > 0)
  ) {
    issues.push({ path: 'maximumAttempts', message: 'maximumAttempts must be a positive integer' });
  }
  ms('heartbeatTimeoutMs', true);
  if (issues.length > 0) return issues;
  const spec = s as unknown as RetrySpec;
  if (spec.maximumIntervalMs < spec.initialIntervalMs) {
    issues.push({ path: 'maximumIntervalMs', message: retrySpecRuleMessages.intervals });
  }
  if (spec.attemptTimeoutMs > spec.budgetMs) {
    issues.push({ path: 'attemptTimeoutMs', message: retrySpecRuleMessages.attemptFits });
  }
  return issues;
}

/** The spec's own fields only (what parsing with the zod schema keeps), absent optional ones left out. */
const pickRetrySpec = (s: RetrySpec): RetrySpec => {
  const out: Record<string, unknown> = {};
  for (const key of retrySpecKeys) if (s[key] !== undefined) out[key] = s[key];
  return out as unknown as RetrySpec;
};

/** A retry spec for one operation against one provider, with the safety it was derived with. */
export type OperationRetrySpec = RetrySpec & {
  readonly operation: ProviderOperation;
  readonly safety: OperationSafety;
};

/** Per-operation partial overrides (from the environment or a workflow input). */
export type RetryOverrides = Partial<Record<ProviderOperation, Partial<RetrySpec>>>;

const writeDefaults = {
  initialIntervalMs: 500,
  backoffCoefficient: 2,
  maximumIntervalMs: 20_000,
  jitter: 'full',
  attemptTimeoutMs: 15_000,
} as const;

/** Production presets. Create/capture are short (a customer may be waiting); void/refund/list can take longer. */
export const defaultRetrySpecs: Readonly<Record<ProviderOperation, RetrySpec>> = {
  create: { ...writeDefaults, budgetMs: 120_000 },
  capture: { ...writeDefaults, budgetMs: 120_000 },
  void: { ...writeDefaults, maximumIntervalMs: 60_000, budgetMs: 600_000 },
  refund: { ...writeDefaults, maximumIntervalMs: 60_000, budgetMs: 600_000 },
  lookup: { ...writeDefaults, initialIntervalMs: 1_000, maximumIntervalMs: 30_000, budgetMs: 300_000 },
  list: {
    ...writeDefaults,
    initialIntervalMs: 1_000,
    maximumIntervalMs: 30_000,
    budgetMs: 600_000,
    attemptTimeoutMs: 30_000,
  },
};

const isWrite = (operation: ProviderOperation): operation is WriteOperation =>
  (writeOperations as readonly ProviderOperation[]).includes(operation);

/** Reads are always safe; a write is idempotent only against a provider that honours idempotency keys. */
export const operationSafety = (operation: ProviderOperation, capabilities: RetryCapabilities): OperationSafety =>
  !isWrite(operation) ? 'read' : capabilities.idempotencyKeys ? 'idempotent-write' : 'non-idempotent-write';

/**
 * The most provider calls one attempt of `operation` can make: a write against a provider without keys first looks
 * its earlier effect up (by key: one call; by reference: up to `referencePages`), a refund reads the payment after
 * it, a look-up by reference walks its pages.
 */
export const callsPerAttempt = (operation: ProviderOperation, capabilities: RetryCapabilities): number => {
  const pages = Math.max(1, capabilities.callLimits?.referencePages ?? 1);
  const lookFirst = operationSafety(operation, capabilities) === 'non-idempotent-write';
  switch (operation) {
    case 'create':
      return (lookFirst ? (capabilities.lookupByKey === true ? 1 : pages) : 0) + 1;
    case 'capture':
    case 'void':
      return (lookFirst ? 1 : 0) + 1;
    case 'refund':
      return (lookFirst ? 1 : 0) + 2;
    case 'lookup':
      return pages;
    case 'list':
      return 1;
  }
};

/**
 * The shortest attempt timeout that lets every call of one attempt end on its own deadline (and so be classified)
 * before Temporal gives the attempt up; undefined when the provider did not report its limits.
 */
export const minAttemptTimeoutMs = (
  operation: ProviderOperation,
  capabilities: RetryCapabilities,
): number | undefined =>
  capabilities.callLimits === undefined
    ? undefined
    : callsPerAttempt(operation, capabilities) * capabilities.callLimits.callTimeoutMs + attemptOverheadMs;

/**
 * The retry spec for `operation` against a provider with `capabilities`: the preset, then `overrides`, then the
 * attempt timeout raised to what one attempt may legitimately take ({@link minAttemptTimeoutMs}), validated. Config
 * rejects an explicit attempt timeout below that minimum at parse time; here (workflow inputs, recorded histories) it
 * is raised, never shortened. Throws a non-retryable `ValidationError` ApplicationFailure on an inconsistent result
 * (safe to call in workflows).
 */
export const retrySpecFor = (
  operation: ProviderOperation,
  capabilities: RetryCapabilities,
  overrides?: Partial<RetrySpec>,
): OperationRetrySpec => {
  const merged = { ...defaultRetrySpecs[operation], ...stripUndefined(overrides ?? {}) };
  const minimum = minAttemptTimeoutMs(operation, capabilities);
  if (minimum !== undefined && merged.attemptTimeoutMs < minimum) merged.attemptTimeoutMs = minimum;
  const issues = retrySpecIssues(merged);
  if (issues.length > 0) {
    throw ApplicationFailure.create({
      type: ErrorType.ValidationError,
      nonRetryable: true,
      message: `invalid retry spec for ${operation}: ${issues.map((i) => `✖ ${i.message}\n  → at ${i.path}`).join('\n')}`,
    });
  }
  return { ...pickRetrySpec(merged), operation, safety: operationSafety(operation, capabilities) };
};

/** Shape 3's default bound on a charge's local first create attempt: short, so a slow provider holds a local slot briefly. */
export const defaultLocalAttemptTimeoutMs = 3_000;

/**
 * The bound of a charge's local first create attempt (shape 3): the starter's wish (`localAttemptTimeoutMs`, default
 * {@link defaultLocalAttemptTimeoutMs}), never longer than one attempt of the create's own preset. The worker's
 * activity bounds itself with it and the workflow counts it off the create's budget, both from the same recorded
 * capabilities and presets, so they agree.
 */
export const localFirstAttemptMs = (
  requestedMs: number | undefined,
  capabilities: RetryCapabilities,
  overrides?: RetryOverrides,
): number =>
  Math.min(
    requestedMs ?? defaultLocalAttemptTimeoutMs,
    retrySpecFor('create', capabilities, overrides?.create).attemptTimeoutMs,
  );

const stripUndefined = <T extends object>(o: T): Partial<T> =>
  Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;

/** Failure types that no retry can fix, whatever the operation. */
const alwaysNonRetryable = [
  ErrorType.ProviderRejected,
  ErrorType.BudgetExhausted,
  ErrorType.IdempotencyKeyReused,
  ErrorType.ValidationError,
  ErrorType.InvalidTransition,
] as const;

/** The `nonRetryableErrorTypes` for a safety class: OutcomeUnknown joins them for a non-idempotent write. */
export const nonRetryableErrorTypesFor = (safety: OperationSafety): string[] =>
  safety === 'non-idempotent-write' ? [...alwaysNonRetryable, ErrorType.OutcomeUnknown] : [...alwaysNonRetryable];

/** Default heartbeat timeout: the activities heartbeat every quarter of it, so a live attempt never misses it. */
export const defaultHeartbeatTimeoutMs = 10_000;

/**
 * Temporal activity options for a spec: start-to-close = one attempt, schedule-to-close = the budget, a heartbeat
 * timeout (so a dead worker's attempt is given up early and cancellation reaches a live one), and the retry policy.
 * Jitter and Retry-After are applied by the activity through `nextRetryDelay` (see {@link computeRetryDelayMs}).
 */
export const toActivityOptions = (spec: RetrySpec, safety: OperationSafety): ActivityOptions => ({
  startToCloseTimeout: spec.attemptTimeoutMs,
  scheduleToCloseTimeout: spec.budgetMs,
  heartbeatTimeout: Math.min(spec.heartbeatTimeoutMs ?? defaultHeartbeatTimeoutMs, spec.attemptTimeoutMs),
  retry: {
    initialInterval: spec.initialIntervalMs,
    backoffCoefficient: spec.backoffCoefficient,
    maximumInterval: spec.maximumIntervalMs,
    ...(spec.maximumAttempts === undefined ? {} : { maximumAttempts: spec.maximumAttempts }),
    nonRetryableErrorTypes: nonRetryableErrorTypesFor(safety),
  },
});

/** The delay before the next attempt, or why there is none. */
export type RetryDelay =
  | { readonly exhausted?: false; readonly delayMs: number }
  | { readonly exhausted: true; readonly reason: 'budget' | 'attempts' | 'retry-after' };

export interface RetryDelayInput {
  readonly spec: RetrySpec;
  /** The attempt that just failed, 1-based. */
  readonly attempt: number;
  /** Uniform in [0, 1); injected so tests (and replays) are deterministic. */
  readonly random: () => number;
  /** What the provider asked for (Retry-After); it wins over the computed backoff. */
  readonly retryAfterMs?: number;
  /** Time since the operation was first scheduled. */
  readonly elapsedMs: number;
}

/**
 * The delay before the next attempt. Backoff is `min(maximumInterval, initial * coefficient^(attempt-1))`, times
 * `random()` with full jitter. Retry-After wins over it. The next attempt must fit in what is left of the budget with
 * its own full `attemptTimeoutMs` (so it is never cut off mid-request by the deadline): the computed delay is shortened
 * to fit, a Retry-After that does not fit is not shortened (retrying earlier than asked only earns another 429) and
 * the answer is `exhausted`, as it is when no attempt fits at all or `maximumAttempts` is reached.
 */
export const computeRetryDelayMs = ({
  spec,
  attempt,
  random,
  retryAfterMs,
  elapsedMs,
}: RetryDelayInput): RetryDelay => {
  const failedAttempt = Math.max(1, Math.floor(attempt));
  if (spec.maximumAttempts !== undefined && failedAttempt >= spec.maximumAttempts) {
    return { exhausted: true, reason: 'attempts' };
  }
  const remaining = spec.budgetMs - Math.max(0, elapsedMs);
  // The longest we may wait and still give the next attempt its whole timeout inside the budget.
  const room = Math.floor(remaining - spec.attemptTimeoutMs);
  if (!(room >= 0)) return { exhausted: true, reason: 'budget' };

  if (retryAfterMs !== undefined && Number.isFinite(retryAfterMs) && retryAfterMs >= 0) {
    const asked = Math.ceil(retryAfterMs);
    return asked <= room ? { delayMs: asked } : { exhausted: true, reason: 'retry-after' };
  }

  const ceiling = Math.min(
    spec.maximumIntervalMs,
    spec.initialIntervalMs * spec.backoffCoefficient ** (failedAttempt - 1),
  );
  const r = Math.min(Math.max(random(), 0), 1);
  const raw = spec.jitter === 'full' ? r * ceiling : ceiling;
  return { delayMs: Math.max(0, Math.min(Math.floor(raw), room)) };
};

/**
 * Rejects a configuration where an idempotent write could be resent after the provider forgot its key: the last
 * retry (budget) plus the reconcile's resubmit window must end before the key's lifetime does.
 */
export const assertResendWindowWithinKeyTtl = (
  spec: RetrySpec & { readonly safety?: OperationSafety },
  capabilities: RetryCapabilities,
  reconcileResubmitWindowMs: number,
): void => {
  const safety = spec.safety ?? (capabilities.idempotencyKeys ? 'idempotent-write' : 'non-idempotent-write');
  if (safety !== 'idempotent-write' || capabilities.keyTtlSeconds === null) return;
  const ttlMs = capabilities.keyTtlSeconds * 1000;
  const windowMs = spec.budgetMs + reconcileResubmitWindowMs;
  if (windowMs >= ttlMs) {
    throw ApplicationFailure.create({
      type: ErrorType.ValidationError,
      nonRetryable: true,
      message:
        `retry budget (${spec.budgetMs} ms) + reconcile resubmit window (${reconcileResubmitWindowMs} ms) = ` +
        `${windowMs} ms reaches the provider's idempotency-key lifetime (${ttlMs} ms): ` +
        'a resend after the provider forgot the key is a second charge',
    });
  }
};

/**
 * What the earlier attempts of one activity did, carried from attempt to attempt in the activity's heartbeat details
 * (`Info.heartbeatDetails`): a later attempt must not take a definite answer to itself for an answer about them.
 */
export interface AttemptRecord {
  /** A write request may have left (a send began and did not end NotSent). */
  everSent: boolean;
  /** A write's outcome was unknown (timeout or reset after send, 5xx, unparseable answer, cancelled after send). */
  everUnknown: boolean;
  /** A write was on its way at the last heartbeat: if its attempt ended there, nobody classified its outcome. */
  inFlight: boolean;
  /**
   * How many writes may have reached the provider (each send that began and did not end NotSent; what the view counts
   * as `attempts`). Absent in records written before it was counted: at least one when `everSent`.
   */
  sends?: number | undefined;
  /**
   * The attempt whose end wrote this record: every attempt of a write closes its record before it fails, and the
   * failure carries it to the next attempt. A later attempt that finds the record not closed by the attempt right before
   * it knows that attempt ended without saying what it did (its worker died, it timed out): it may have sent, with an
   * unknown outcome, even when no heartbeat of its send reached the server (the SDK throttles heartbeats). Absent in
   * records written before attempts closed them: they count as not closed.
   */
  closedBy?: number | undefined;
}

/** Nothing done yet. */
export const noAttempts: AttemptRecord = { everSent: false, everUnknown: false, inFlight: false, sends: 0 };

/** `reason` of the OutcomeUnknown a rejection becomes when an earlier attempt's outcome was unknown. */
export const RejectedAfterUnknown = 'rejected_after_unknown';
