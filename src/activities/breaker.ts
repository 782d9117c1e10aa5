import { ErrorType, type ProviderFailureType } from '../domain/errors';

/** What the breaker says before a call: go ahead, or not before `retryAfterMs`. */
export type BreakerDecision = { readonly allowed: true } | { readonly allowed: false; readonly retryAfterMs: number };

/** What a call ended in, as far as the provider's health goes. */
export type BreakerOutcome = 'success' | ProviderFailureType;

/**
 * A per-provider circuit breaker. Methods may be async so a shared store (Redis in production) can back it; the
 * activities call `acquire` once before their provider calls and `record` exactly once after.
 */
export interface CircuitBreaker {
  acquire(provider: string): BreakerDecision | Promise<BreakerDecision>;
  record(provider: string, outcome: BreakerOutcome): void | Promise<void>;
}

/** The failures that say "the provider is unwell". A rejection is a healthy answer; CircuitOpen is our own doing. */
const unhealthy: ReadonlySet<BreakerOutcome> = new Set([
  ErrorType.NotSent,
  ErrorType.ProviderUnavailable,
  ErrorType.OutcomeUnknown,
]);

export type BreakerState =
  | { readonly kind: 'closed'; readonly failures: number }
  | { readonly kind: 'open'; readonly until: number }
  | { readonly kind: 'half_open'; readonly trialSince: number };

export interface InMemoryBreakerOptions {
  /** Consecutive NotSent/ProviderUnavailable/OutcomeUnknown outcomes that open the breaker. Default 5. */
  readonly failureThreshold?: number;
  /** How long it stays open before one trial call is let through. Default 30 s. */
  readonly cooldownMs?: number;
  readonly now?: () => number;
}

/** An in-process breaker: closed → open after N consecutive failures → half-open (one trial) after the cool-down. */
export class InMemoryCircuitBreaker implements CircuitBreaker {
  readonly #states = new Map<string, BreakerState>();
  readonly #threshold: number;
  readonly #cooldownMs: number;
  readonly #now: () => number;

  constructor(options: InMemoryBreakerOptions = {}) {
    this.#threshold = options.failureThreshold ?? 5;
    this.#cooldownMs = options.cooldownMs ?? 30_000;
    this.#now = options.now ?? Date.now;
  }

  /** The provider's current state (closed when never seen). */
  state(provider: string): BreakerState {
    return this.#states.get(provider) ?? { kind: 'closed', failures: 0 };
  }

  acquire(provider: string): BreakerDecision {
    const state = this.state(provider);
    const now = this.#now();
    switch (state.kind) {
      case 'closed':
        return { allowed: true };
      case 'open':
        if (now < state.until) return { allowed: false, retryAfterMs: state.until - now };
        this.#states.set(provider, { kind: 'half_open', trialSince: now });
        return { allowed: true };
      case 'half_open':
        // A trial whose outcome never came back (a crashed worker) must not keep the breaker shut for good.
        if (now - state.trialSince >= this.#cooldownMs) {
          this.#states.set(provider, { kind: 'half_open', trialSince: now });
          return { allowed: true };
        }
        return { allowed: false, retryAfterMs: Math.max(1, this.#cooldownMs - (now - state.trialSince)) };
    }
  }

  record(provider: string, outcome: BreakerOutcome): void {
    const state = this.state(provider);
    if (!unhealthy.has(outcome)) {
      if (outcome === ErrorType.CircuitOpen) return;
      this.#states.set(provider, { kind: 'closed', failures: 0 });
      return;
    }
    const open: BreakerState = { kind: 'open', until: this.#now() + this.#cooldownMs };
    if (state.kind === 'half_open') this.#states.set(provider, open);
    else if (state.kind === 'closed') {
      const failures = state.failures + 1;
      this.#states.set(provider, failures >= this.#threshold ? open : { kind: 'closed', failures });
    }
    // Already open: a call that started before it opened changes nothing.
  }
}
