/**
 * The attempt pipeline every provider activity runs: breaker → call → classify → log. One activity attempt checks the
 * breaker (writes only), makes its provider call(s) on a provider that records what it may have sent, turns any failure
 * into exactly one typed ApplicationFailure, records exactly one outcome with the breaker and writes one log line.
 */
import { Context, type Info } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import { msToNumber } from '@temporalio/common/lib/time';
import type { Logger } from 'pino';
import {
  type BreakerDecision,
  type BreakerOutcome,
  type BreakerReport,
  type CircuitBreaker,
  breakerReport,
} from '../../breaker';
import { ErrorType } from '../../domain/errors';
import type { ScopeOperation } from '../../domain/ids';
import {
  AttemptRecord,
  carriedAttemptRecord,
  operationSafety,
  retrySpecFor,
  type OperationSafety,
  type ProviderOperation,
  type RetryOverrides,
  type RetrySpec,
} from '../../domain/retry';
import { CircuitOpenError, isProviderError } from '../../providers/errors';
import { keyHash } from '../../providers/logging';
import type { CallContext, PaymentProvider, ProviderCapabilities } from '../../providers/types';
import { providerIdempotencyKey } from '../keys';
import { type AttemptHistory, failureDetailsOf, rejectedAfterUnknown, toActivityFailure } from './failure';
import { attemptProvider } from './provider';
import { capabilitiesDiffer, refuseToSend } from './worker-config';

/** What the pipeline needs; everything with I/O or time is injected (tests pass fakes, the worker the real ones). */
export interface AttemptDeps {
  /** Provider adapters by name (`simulator`, ...); an activity's `provider` argument picks one. */
  readonly providers: Readonly<Record<string, PaymentProvider>>;
  readonly logger: Logger;
  readonly breaker?: CircuitBreaker;
  /** Uniform in [0, 1), for full jitter. Default `Math.random`. */
  readonly random?: () => number;
  /** Epoch ms. Default `Date.now`. */
  readonly now?: () => number;
  /**
   * The worker's retry presets (`RETRY_*`): what a shape-3 charge learns from `firstCreateAttempt` and runs every
   * activity with, and what an activity falls back on when Temporal does not tell it its retry policy.
   */
  readonly retry?: RetryOverrides;
}

/** The scope a write's provider idempotency key is derived from (`providerIdempotencyKey`). */
export interface IdempotencyScope {
  readonly merchantId: string;
  readonly operation: ScopeOperation;
  readonly key: string;
  readonly keyProvider?: string;
}

/** One attempt, as an activity's provider calls see it. */
export interface Step {
  readonly provider: PaymentProvider;
  readonly attempt: number;
  readonly safety: OperationSafety;
  /** Set for writes: the key sent to the provider. */
  readonly idempotencyKey?: string;
  readonly ctx: CallContext;
  /** Epoch ms when the activity was first scheduled. */
  readonly scheduledAtMs: number;
  /** A provider without keys, on a retry: look before sending again. */
  readonly mustLookBeforeResend: boolean;
  /** How many writes this activity's attempts may have sent so far (earlier attempts' included). */
  sends(): number;
}

/** What an attempt's calls answered. */
export interface Outcome<T> {
  readonly value: T;
  /** For the log: `succeeded`, `declined`, `recovered`, `not_found`. */
  readonly outcome: string;
}

/** One activity execution, as {@link AttemptPipeline.execute} runs it. */
export interface Execution<T> {
  /** The activity's name, for the log line. */
  readonly activity: string;
  /** Picks the retry preset and the safety class. */
  readonly operation: ProviderOperation;
  /** The provider's name (the activity's `provider` argument). */
  readonly provider: string;
  /** The scope of the key sent with the call; absent for a call sent under no key (a list). */
  readonly scope?: IdempotencyScope;
  /** The provider call(s) of one attempt. */
  readonly call: (step: Step) => Promise<Outcome<T>>;
  /** An earlier operation on this key had an unknown outcome (a reconcile's resubmission): start the record so. */
  readonly afterUnknown?: boolean;
  /** What an attempt outside this activity did first (a local first attempt): carried like an earlier attempt's. */
  readonly before?: { readonly everSent: boolean; readonly everUnknown: boolean };
  /** Aborts the provider call (default: the activity's cancellation; a local first attempt adds its own bound). */
  readonly signal?: AbortSignal;
  /** The provider's capabilities as the payment recorded them: a worker whose adapter differs refuses to send. */
  readonly expectCapabilities?: ProviderCapabilities;
}

/** The pipeline over injected providers, breaker, logger and clock; the activities run every provider call through it. */
export const createAttemptPipeline = (deps: AttemptDeps) => {
  const now = deps.now ?? Date.now;
  const random = deps.random ?? Math.random;

  const providerNamed = (name: string): PaymentProvider => {
    const provider = Object.hasOwn(deps.providers, name) ? deps.providers[name] : undefined;
    if (!provider) {
      throw ApplicationFailure.create({
        type: ErrorType.ValidationError,
        message: `no provider named "${name}" is configured on this worker`,
        nonRetryable: true,
        details: [{ at: new Date().toISOString() }],
      });
    }
    return provider;
  };

  /** The retry spec this attempt runs under: Temporal's policy and timeouts when it tells us, else our preset. */
  const effectiveSpec = (info: Info, operation: ProviderOperation, capabilities: ProviderCapabilities): RetrySpec => {
    const preset = retrySpecFor(operation, capabilities, deps.retry?.[operation]);
    // A local first attempt is attempt 1 of the create, not an activity of its own: its failure is classified with the
    // create's preset (the delay before the activity takes over, or the budget exhausted), never with the local
    // activity's one-attempt policy, so the workflow and the metrics see what attempt 1 on the provider's queue would.
    if (info.isLocal) return preset;
    const policy = info.retryPolicy;
    const ms = (d: Parameters<typeof msToNumber>[0] | undefined, fallback: number) =>
      d === undefined || d === null ? fallback : msToNumber(d) || fallback;
    return {
      ...preset,
      initialIntervalMs: ms(policy?.initialInterval, preset.initialIntervalMs),
      backoffCoefficient: policy?.backoffCoefficient || preset.backoffCoefficient,
      maximumIntervalMs: ms(policy?.maximumInterval, preset.maximumIntervalMs),
      maximumAttempts: policy?.maximumAttempts || preset.maximumAttempts,
      budgetMs: info.scheduleToCloseTimeoutMs > 0 ? info.scheduleToCloseTimeoutMs : preset.budgetMs,
      attemptTimeoutMs: info.startToCloseTimeoutMs > 0 ? info.startToCloseTimeoutMs : preset.attemptTimeoutMs,
    };
  };

  // The breaker is advisory: if its store fails, calls go ahead (fail open) rather than fail for a reason of ours.
  const acquire = async (provider: string, log: Logger): Promise<BreakerDecision> => {
    try {
      return deps.breaker ? await deps.breaker.acquire(provider) : { allowed: true };
    } catch (err) {
      log.error({ err }, 'circuit breaker unavailable; calling the provider anyway');
      return { allowed: true };
    }
  };
  const record = async (provider: string, outcome: BreakerOutcome, report: BreakerReport, log: Logger) => {
    try {
      await deps.breaker?.record(provider, outcome, report);
    } catch (err) {
      log.error({ err }, 'circuit breaker unavailable; outcome not recorded');
    }
  };

  /**
   * One activity execution: breaker check, the provider call(s), classification of any failure into a typed
   * ApplicationFailure, exactly one breaker record and one log line.
   */
  const execute = async <T>(execution: Execution<T>): Promise<T> => {
    const { activity, operation, scope, call, afterUnknown = false, before, signal, expectCapabilities } = execution;
    const provider = providerNamed(execution.provider);
    const context = Context.current();
    const { info } = context;
    const attempt = info.attempt;
    const safety = operationSafety(operation, provider.capabilities);
    const idempotencyKey =
      scope === undefined
        ? undefined
        : providerIdempotencyKey(scope.merchantId, scope.operation, scope.key, scope.keyProvider);
    const hash = idempotencyKey === undefined ? undefined : keyHash(idempotencyKey);
    const log = deps.logger.child({ activity, provider: provider.name, attempt, ...(hash ? { keyHash: hash } : {}) });
    const started = now();

    // What earlier attempts did (their heartbeat details), and what this one adds as it goes.
    const earlier = AttemptRecord.safeParse(info.heartbeatDetails);
    const carried = startingRecord(info.heartbeatDetails, attempt, before, afterUnknown);
    const attempts = { current: carried, wrote: false };
    const history = (): AttemptHistory | undefined =>
      safety === 'read'
        ? undefined
        : {
            everSent: attempts.current.everSent,
            everUnknown: attempts.current.everUnknown,
            sends: attempts.current.sends ?? 0,
            ...(earlier.success ? { earlier: earlier.data } : {}),
          };
    // A local activity (a charge's local first attempt) has no heartbeat: the core refuses one with a warning per call.
    const beat = () => {
      if (!info.isLocal) context.heartbeat(attempts.current);
    };
    // Every attempt of a write that fails closes its record last: the failure carries the last heartbeat's details to
    // the next attempt, which counts an attempt that did not close (it died mid-way) as one that may have sent.
    const close = () => {
      attempts.current = { ...attempts.current, closedBy: attempt };
      beat();
    };

    // The retry spec follows the provider's capabilities as the payment recorded them where it says (this worker's may
    // differ, and then this attempt refuses to send), else this worker's.
    const classify = (err: unknown) => {
      const h = history();
      return toActivityFailure(err, {
        operation,
        safety,
        provider: provider.name,
        attempt,
        spec: effectiveSpec(info, operation, expectCapabilities ?? provider.capabilities),
        elapsedMs: elapsedSinceScheduled(info, now()),
        random,
        ...(h === undefined ? {} : { history: h }),
      });
    };

    // A worker whose adapter differs from the one the payment recorded never sends for it (wrong safety, wrong timeouts).
    if (expectCapabilities !== undefined) {
      const differs = capabilitiesDiffer(provider, expectCapabilities);
      if (differs !== undefined) throw refuseToSend(operation, differs, attempts.current, classify, close, log);
    }

    // The breaker gates writes only: it exists to stop piling new, possibly-unknown effects onto a failing provider.
    // Reads are how a reconcile learns the truth; they go through (and still report their outcome to the breaker).
    const decision: BreakerDecision = safety === 'read' ? { allowed: true } : await acquire(provider.name, log);
    if (!decision.allowed) {
      const failure = classify(
        new CircuitOpenError({ operation, reason: 'breaker_open', retryAfterMs: decision.retryAfterMs }),
      );
      // Keep what earlier attempts did for the next one, closed by this attempt: it sent nothing.
      close();
      log.warn(
        { outcome: ErrorType.CircuitOpen, failure: failure.type, nextRetryDelay: failure.nextRetryDelay },
        'activity',
      );
      throw failure;
    }

    // Heartbeats between sends too: Temporal delivers a cancellation (the attempt timed out, the workflow was
    // cancelled) only in answer to one, and the signal below is how it reaches the HTTP call in flight.
    const ticker = setInterval(beat, Math.max(1_000, Math.floor((info.heartbeatTimeoutMs || 20_000) / 4)));
    ticker.unref();
    const requestId = `req_${hash ?? activity}_${attempt}`;
    try {
      const result = await call({
        provider: attemptProvider(
          provider,
          { requestId, attempt, signal: signal ?? context.cancellationSignal },
          attempts,
          beat,
        ),
        attempt,
        safety,
        ...(idempotencyKey === undefined ? {} : { idempotencyKey }),
        ctx: { idempotencyKey: idempotencyKey ?? '', attempt, requestId },
        scheduledAtMs: info.scheduledTimestampMs,
        mustLookBeforeResend: attempt > 1 && safety === 'non-idempotent-write',
        sends: () => attempts.current.sends ?? 0,
      });
      await record(provider.name, 'success', breakerReport(safety, decision, undefined, attempts.wrote), log);
      log.info({ outcome: result.outcome, durationMs: now() - started }, 'activity');
      return result.value;
    } catch (caught) {
      const details = failureDetailsOf(caught, operation);
      await record(provider.name, details.type, breakerReport(safety, decision, details, attempts.wrote), log);
      const err = safety === 'read' ? caught : rejectedAfterUnknown(caught, operation, carried);
      const failure = classify(err);
      if (safety !== 'read') close();
      log.warn(
        {
          outcome: failureDetailsOf(err, operation).type,
          failure: failure.type,
          nonRetryable: failure.nonRetryable,
          nextRetryDelay: failure.nextRetryDelay,
          reason: isProviderError(err) ? err.details.reason : 'unexpected_error',
          ...history(),
          durationMs: now() - started,
        },
        'activity',
      );
      throw failure;
    } finally {
      clearInterval(ticker);
    }
  };

  return { providerNamed, execute };
};

/** The attempt pipeline of one set of activities. */
export type AttemptPipeline = ReturnType<typeof createAttemptPipeline>;

/**
 * How much of the activity's budget is spent: since its first attempt was scheduled, by this worker's clock, and never
 * less than the server's own measure (this attempt's scheduling time against the first's). The two agree on a real
 * server; on the time-skipping test server, whose clock runs hours ahead of the worker's, only the second sees the
 * skipped backoffs, so a budget there ends by our reckoning too, not only by the server's deadline check (read as the
 * likely cause of one CI failure of test/workflows/reconcile-outage.test.ts: a look-up retried past its budget).
 */
export function elapsedSinceScheduled(
  info: Pick<Info, 'scheduledTimestampMs' | 'currentAttemptScheduledTimestampMs'>,
  nowMs: number,
): number {
  return Math.max(
    nowMs - info.scheduledTimestampMs,
    info.currentAttemptScheduledTimestampMs - info.scheduledTimestampMs,
  );
}

/**
 * The record an attempt starts from: what earlier attempts left in the heartbeat details, plus what was done outside
 * this activity (`before`, `afterUnknown`), which decides safety but is not one of its own sends.
 */
function startingRecord(
  heartbeatDetails: unknown,
  attempt: number,
  before: Execution<unknown>['before'],
  afterUnknown: boolean,
): AttemptRecord {
  const fromHeartbeat = carriedAttemptRecord(heartbeatDetails, attempt);
  const fromAttempts =
    before === undefined
      ? fromHeartbeat
      : {
          ...fromHeartbeat,
          everSent: fromHeartbeat.everSent || before.everSent,
          everUnknown: fromHeartbeat.everUnknown || before.everUnknown,
        };
  return afterUnknown ? { ...fromAttempts, everSent: true, everUnknown: true } : fromAttempts;
}
