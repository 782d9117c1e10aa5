import { randomUUID } from 'node:crypto';
import { ErrorType, type ProviderFailureType } from '../domain/errors';
import type { OperationSafety } from '../domain/retry';
import type { ProviderFailureDetails } from '../providers/types';
import { type CountingPolicy, FailureCounter, type SlidingWindowPolicy } from './breaker-counting';

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
  /** `read` outcomes count as failures but never as proof of health (only a write probe closes a half-open breaker). */
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

/** The report an activity sends with its outcome: read or write, its probe token, and any cool-down asked for. */
export const breakerReport = (
  safety: OperationSafety,
  decision: BreakerDecision,
  failure?: ProviderFailureDetails,
): BreakerReport => {
  const coolDownMs = failure === undefined ? undefined : coolDownOf(failure);
  return {
    kind: safety === 'read' ? 'read' : 'write',
    ...(decision.allowed && decision.probe !== undefined ? { probe: decision.probe } : {}),
    ...(coolDownMs === undefined ? {} : { coolDownMs }),
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
}

export interface ResolvedBreakerOptions {
  readonly counting: CountingPolicy;
  readonly openMs: number;
  readonly probeTimeoutMs: number;
  readonly jitterMs: number;
  readonly now: () => number;
  readonly random: () => number;
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
  };
};

/** A refusal with jitter on top of the wait. */
export const refusal = (
  options: Pick<ResolvedBreakerOptions, 'jitterMs' | 'random'>,
  waitMs: number,
  reason: BreakerBlock,
): BreakerDecision => ({
  allowed: false,
  retryAfterMs: Math.max(1, Math.ceil(waitMs)) + Math.floor(options.random() * options.jitterMs),
  reason,
});

/** The old name of the breaker options, kept for callers. */
export type InMemoryBreakerOptions = BreakerOptions;

interface Entry {
  state: 'closed' | 'open' | 'half_open';
  openUntil: number;
  probe: string | undefined;
  probeUntil: number;
  readonly counter: FailureCounter;
  /** Provider-wide cool-down: no write before this (epoch ms). */
  notBefore: number;
}

/**
 * The in-process store: closed → open (counting strategy says so) → half-open after the open period, where exactly one
 * write is let through as the probe; its outcome closes or re-opens the breaker. Used when no Redis is configured and
 * as the fallback while Redis is unreachable.
 */
export class InMemoryCircuitBreaker implements InspectableBreaker {
  readonly #entries = new Map<string, Entry>();
  readonly #o: ResolvedBreakerOptions;

  constructor(options: BreakerOptions = {}) {
    this.#o = resolveBreakerOptions(options);
  }

  #entry(provider: string): Entry {
    let entry = this.#entries.get(provider);
    if (!entry) {
      entry = {
        state: 'closed',
        openUntil: 0,
        probe: undefined,
        probeUntil: 0,
        counter: new FailureCounter(this.#o.counting),
        notBefore: 0,
      };
      this.#entries.set(provider, entry);
    }
    return entry;
  }

  /** The provider's current state (closed when never seen). */
  state(provider: string): BreakerState {
    const e = this.#entries.get(provider);
    if (!e || e.state === 'closed') return { kind: 'closed', failures: e?.counter.consecutive ?? 0 };
    return e.state === 'open' ? { kind: 'open', until: e.openUntil } : { kind: 'half_open', probeUntil: e.probeUntil };
  }

  acquire(provider: string): BreakerDecision {
    const e = this.#entry(provider);
    const now = this.#o.now();
    if (now < e.notBefore) return refusal(this.#o, e.notBefore - now, 'cool_down');
    if (e.state === 'closed') return { allowed: true };
    if (e.state === 'open' && now < e.openUntil) return refusal(this.#o, e.openUntil - now, 'open');
    // A probe whose outcome never came back (a crashed worker) must not keep the breaker shut for good.
    if (e.state === 'half_open' && now < e.probeUntil) return refusal(this.#o, e.probeUntil - now, 'probe_in_flight');
    const probe = randomUUID();
    Object.assign(e, { state: 'half_open', probe, probeUntil: now + this.#o.probeTimeoutMs });
    return { allowed: true, probe };
  }

  record(provider: string, outcome: BreakerOutcome, report: BreakerReport = {}): void {
    const e = this.#entry(provider);
    const now = this.#o.now();
    if (report.coolDownMs !== undefined && report.coolDownMs > 0) {
      e.notBefore = Math.max(e.notBefore, now + report.coolDownMs);
    }
    const cls = outcomeClass(outcome);
    if (cls === 'ignored') return;
    if (e.state === 'half_open') {
      // Only the probe decides; a late call that started before the breaker opened, or a read, proves nothing.
      if (report.probe === undefined || report.probe !== e.probe) return;
      e.counter.reset();
      if (cls === 'healthy') Object.assign(e, { state: 'closed', probe: undefined, probeUntil: 0 });
      else Object.assign(e, { state: 'open', openUntil: now + this.#o.openMs, probe: undefined, probeUntil: 0 });
      return;
    }
    // Already open: a call that started before it opened changes nothing.
    if (e.state === 'open') return;
    // A read's success says nothing about whether writes go through.
    if (cls === 'healthy' && report.kind === 'read') return;
    if (e.counter.record(cls === 'healthy', now)) {
      e.counter.reset();
      Object.assign(e, { state: 'open', openUntil: now + this.#o.openMs });
    }
  }
}
