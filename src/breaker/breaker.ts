/**
 * The per-provider circuit breaker's contract: what a store decides before a write and is told after every call, how an
 * outcome counts, what it lets the process observe, and the options and refusal rules both stores (in-memory.ts,
 * redis.ts) share.
 */
import { ErrorType, type ProviderFailureType } from '../domain/errors';
import type { OperationSafety } from '../domain/retry';
import type { ProviderFailureDetails } from '../providers/types';
import type { CountingPolicy, SlidingWindowPolicy } from './counting';

/** Why a write may not go now: the breaker is open, its one half-open probe is out, or the provider asked for a pause. */
export type BreakerBlock = 'open' | 'probe_in_flight' | 'cool_down';

/**
 * What the breaker says before a write: go ahead (as the half-open probe when `probe` is set), or not before
 * `retryAfterMs` (jitter included, so the waiters do not all come back at the same instant).
 */
export type BreakerDecision =
  | { readonly allowed: true; readonly probe?: string }
  | { readonly allowed: false; readonly retryAfterMs: number; readonly reason: BreakerBlock };

/** What a call ended in, as far as the provider's health goes. */
export type BreakerOutcome = 'success' | ProviderFailureType;

/** What a record says besides the outcome. */
export interface BreakerReport {
  /**
   * What reached the provider: `write` when the write was sent or tried to connect; `read` for a read, and for a write
   * that never reached for the provider (found already done by its look-up before the resend, or cut off before it
   * was sent). `read` outcomes count as failures but never as proof of health, and never decide a half-open breaker:
   * a probe that reports `read` gives its slot back.
   */
  readonly kind?: 'read' | 'write';
  /** The token `acquire` handed out when this call was the half-open probe. */
  readonly probe?: string;
  /** The provider asked everyone to wait (429/503 with Retry-After): no write to it before this many ms from now. */
  readonly coolDownMs?: number;
}

/**
 * A per-provider circuit breaker. Methods may be async so a shared store (Redis) can back it; the activities call
 * `acquire` once before a write and `record` exactly once after every call.
 */
export interface CircuitBreaker {
  acquire(provider: string): BreakerDecision | Promise<BreakerDecision>;
  record(provider: string, outcome: BreakerOutcome, report?: BreakerReport): void | Promise<void>;
}

/** A breaker whose state can be read (tests, logs, metrics). */
export interface InspectableBreaker extends CircuitBreaker {
  state(provider: string): BreakerState | Promise<BreakerState>;
}

export type BreakerState =
  | { readonly kind: 'closed'; readonly failures: number }
  | { readonly kind: 'open'; readonly until: number }
  | { readonly kind: 'half_open'; readonly probeUntil: number };

/** How an outcome counts: a rejection or a decline is a healthy answer; CircuitOpen is our own doing. */
export const outcomeClass = (outcome: BreakerOutcome): 'healthy' | 'unhealthy' | 'ignored' => {
  switch (outcome) {
    case 'success':
    case ErrorType.ProviderRejected:
      return 'healthy';
    case ErrorType.NotSent:
    case ErrorType.ProviderUnavailable:
    case ErrorType.OutcomeUnknown:
      return 'unhealthy';
    case ErrorType.CircuitOpen:
      return 'ignored';
  }
};

/** The provider-wide pause a failure asks for: a 429 or 503 that carried Retry-After. */
export const coolDownOf = (details: ProviderFailureDetails): number | undefined =>
  details.type === ErrorType.ProviderUnavailable &&
  (details.status === 429 || details.status === 503) &&
  details.retryAfterMs !== undefined &&
  details.retryAfterMs > 0
    ? details.retryAfterMs
    : undefined;

/**
 * The report an activity sends with its outcome: read or write (`wrote`: whether a write's request reached for the
 * provider; default yes), its probe token, and any cool-down asked for.
 */
export const breakerReport = (
  safety: OperationSafety,
  decision: BreakerDecision,
  failure?: ProviderFailureDetails,
  wrote = true,
): BreakerReport => {
  const coolDownMs = failure === undefined ? undefined : coolDownOf(failure);
  return {
    kind: safety === 'read' || !wrote ? 'read' : 'write',
    ...(decision.allowed && decision.probe !== undefined ? { probe: decision.probe } : {}),
    ...(coolDownMs === undefined ? {} : { coolDownMs }),
  };
};

/** A breaker state's name. */
export type BreakerStateKind = BreakerState['kind'];

/** The state changed: `closed → open` (a trip), `open → half_open` (a probe went out), `half_open → closed | open`. */
export interface BreakerTransitionEvent {
  readonly provider: string;
  readonly from: BreakerStateKind;
  readonly to: BreakerStateKind;
  /** Epoch ms (the breaker's clock). */
  readonly atMs: number;
}

/**
 * The half-open probe went out (`sent`), its outcome closed (`succeeded`) or re-opened (`failed`) the breaker, or its
 * write never reached the provider and it gave its slot back (`released`: the next write is the probe).
 */
export interface BreakerProbeEvent {
  readonly provider: string;
  readonly result: 'sent' | 'succeeded' | 'failed' | 'released';
  readonly atMs: number;
}

/** The provider asked everyone to wait (429/503 with Retry-After) and that moved its "not before" to `untilMs`. */
export interface BreakerCoolDownEvent {
  readonly provider: string;
  readonly coolDownMs: number;
  readonly untilMs: number;
  readonly atMs: number;
}

/** A write was refused before it was sent. */
export interface BreakerRefusalEvent {
  readonly provider: string;
  readonly reason: BreakerBlock;
  /** The wait handed to the caller, jitter included. */
  readonly retryAfterMs: number;
  readonly atMs: number;
}

/** Which store a worker's breaker answers from (the fallback switches when Redis goes away and comes back). */
export interface BreakerStoreEvent {
  readonly store: 'shared' | 'local';
  readonly atMs: number;
}

/**
 * What a breaker lets the rest of the process observe (metrics subscribe here; the breaker knows nothing of them).
 * With the shared store each event is reported once, by the process whose call caused it: summed over the fleet,
 * trips, probes and cool-downs count each occurrence once. Observers are called synchronously and must not throw;
 * an error they throw is swallowed so that metrics can never change a breaker decision.
 */
export interface BreakerObserver {
  onTransition?(event: BreakerTransitionEvent): void;
  onProbe?(event: BreakerProbeEvent): void;
  onCoolDown?(event: BreakerCoolDownEvent): void;
  onRefusal?(event: BreakerRefusalEvent): void;
  onStoreChange?(event: BreakerStoreEvent): void;
}

/** Every hook present, each one safe to call: a missing hook does nothing, a throwing one is ignored. */
export type BreakerNotifier = { readonly [K in keyof BreakerObserver]-?: NonNullable<BreakerObserver[K]> };

export const breakerNotifier = (observer: BreakerObserver = {}): BreakerNotifier => {
  const safe =
    <E>(hook: ((event: E) => void) | undefined) =>
    (event: E): void => {
      if (hook === undefined) return;
      try {
        hook.call(observer, event);
      } catch {
        // Observing must never change what the breaker decides.
      }
    };
  return {
    onTransition: safe(observer.onTransition),
    onProbe: safe(observer.onProbe),
    onCoolDown: safe(observer.onCoolDown),
    onRefusal: safe(observer.onRefusal),
    onStoreChange: safe(observer.onStoreChange),
  };
};

export interface BreakerOptions {
  /** Consecutive NotSent/ProviderUnavailable/OutcomeUnknown outcomes that open the breaker. Default 5. */
  readonly failureThreshold?: number;
  /** A failure rate over a sliding window that also opens it. Default: none. */
  readonly window?: SlidingWindowPolicy;
  /** How long it stays open before one probe is let through. Default 30 s. */
  readonly cooldownMs?: number;
  /** How long a probe may be out before another one is allowed (its worker may have died). Default `cooldownMs`. */
  readonly probeTimeoutMs?: number;
  /** Up to this much random delay is added to every refusal's `retryAfterMs`. Default 0. */
  readonly jitterMs?: number;
  readonly now?: () => number;
  /** Uniform in [0, 1), for the jitter. Default `Math.random`. */
  readonly random?: () => number;
  /** Told of transitions, probes, cool-downs and refusals (e.g. metrics). */
  readonly observer?: BreakerObserver;
}

export interface ResolvedBreakerOptions {
  readonly counting: CountingPolicy;
  readonly openMs: number;
  readonly probeTimeoutMs: number;
  readonly jitterMs: number;
  readonly now: () => number;
  readonly random: () => number;
  readonly notify: BreakerNotifier;
}

export const resolveBreakerOptions = (o: BreakerOptions = {}): ResolvedBreakerOptions => {
  const openMs = o.cooldownMs ?? 30_000;
  return {
    counting: { consecutiveFailures: o.failureThreshold ?? 5, ...(o.window ? { window: o.window } : {}) },
    openMs,
    probeTimeoutMs: o.probeTimeoutMs ?? openMs,
    jitterMs: o.jitterMs ?? 0,
    now: o.now ?? Date.now,
    random: o.random ?? Math.random,
    notify: breakerNotifier(o.observer),
  };
};

/** A refusal with jitter on top of the wait (reported to the observer). */
export const refusal = (
  options: Pick<ResolvedBreakerOptions, 'jitterMs' | 'random' | 'notify'>,
  provider: string,
  atMs: number,
  waitMs: number,
  reason: BreakerBlock,
): BreakerDecision => {
  const retryAfterMs = Math.max(1, Math.ceil(waitMs)) + Math.floor(options.random() * options.jitterMs);
  options.notify.onRefusal({ provider, reason, retryAfterMs, atMs });
  return { allowed: false, retryAfterMs, reason };
};

/** Reports a probe let through: the transition out of open (none when a lost probe's slot is taken again). */
export const reportProbeTaken = (
  notify: BreakerNotifier,
  provider: string,
  from: BreakerStateKind,
  atMs: number,
): void => {
  if (from !== 'half_open') notify.onTransition({ provider, from, to: 'half_open', atMs });
  notify.onProbe({ provider, result: 'sent', atMs });
};

/** Reports a probe that gave its slot back without deciding: no transition, the breaker stays half-open. */
export const reportProbeReleased = (notify: BreakerNotifier, provider: string, atMs: number): void => {
  notify.onProbe({ provider, result: 'released', atMs });
};

/** Reports the probe's outcome: it closed the breaker or re-opened it. */
export const reportProbeOutcome = (notify: BreakerNotifier, provider: string, healthy: boolean, atMs: number): void => {
  notify.onProbe({ provider, result: healthy ? 'succeeded' : 'failed', atMs });
  notify.onTransition({ provider, from: 'half_open', to: healthy ? 'closed' : 'open', atMs });
};
