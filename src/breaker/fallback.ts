import {
  type BreakerDecision,
  type BreakerNotifier,
  type BreakerObserver,
  type BreakerOutcome,
  type BreakerReport,
  type BreakerState,
  type CircuitBreaker,
  type InspectableBreaker,
  breakerNotifier,
} from './breaker';

/** The shared store as the fallback sees it: a breaker that can say whether its connection is up. */
export interface SharedBreaker extends InspectableBreaker {
  readonly available: boolean;
}

/** Where the two transitions are reported (a pino logger fits). */
export interface FallbackLog {
  warn(obj: object, msg: string): void;
  info(obj: object, msg: string): void;
}

/**
 * The shared store while it answers, the in-process one while it does not: payments never stop because Redis did.
 * Every call tries the shared store again once its connection is back, so the fleet returns to one shared state
 * without a restart. (State kept in-process meanwhile is not copied over: the shared store's own, or a fresh closed
 * breaker when Redis restarted empty, wins.)
 */
export class FallbackCircuitBreaker implements InspectableBreaker {
  #usingFallback = false;
  readonly #notify: BreakerNotifier;

  /** `observer.onStoreChange` hears each switch (the stores' own observers hear their events). */
  constructor(
    readonly shared: SharedBreaker,
    readonly local: CircuitBreaker & InspectableBreaker,
    private readonly log: FallbackLog,
    observer: Pick<BreakerObserver, 'onStoreChange'> = {},
    private readonly now: () => number = Date.now,
  ) {
    this.#notify = breakerNotifier(observer);
  }

  /** Which store answers now. */
  get store(): 'shared' | 'local' {
    return this.#usingFallback ? 'local' : 'shared';
  }

  async #either<T>(shared: () => Promise<T>, local: () => T | Promise<T>): Promise<T> {
    if (this.shared.available) {
      try {
        const result = await shared();
        if (this.#usingFallback) {
          this.#usingFallback = false;
          this.log.info({ breakerStore: 'redis' }, 'shared breaker store (Redis) is back; using it again');
          this.#notify.onStoreChange({ store: 'shared', atMs: this.now() });
        }
        return result;
      } catch (err) {
        this.#fallBack(err);
      }
    } else this.#fallBack(new Error('Redis connection is not ready'));
    return local();
  }

  #fallBack(err: unknown): void {
    if (this.#usingFallback) return;
    this.#usingFallback = true;
    this.log.warn(
      { err, breakerStore: 'in-process' },
      'shared breaker store (Redis) unreachable; this worker uses its in-process breaker until it is back',
    );
    this.#notify.onStoreChange({ store: 'local', atMs: this.now() });
  }

  acquire(provider: string): Promise<BreakerDecision> {
    return this.#either(
      async () => this.shared.acquire(provider),
      () => this.local.acquire(provider),
    );
  }

  record(provider: string, outcome: BreakerOutcome, report?: BreakerReport): Promise<void> {
    return this.#either(
      async () => this.shared.record(provider, outcome, report),
      () => this.local.record(provider, outcome, report),
    );
  }

  state(provider: string): Promise<BreakerState> {
    return this.#either(
      async () => this.shared.state(provider),
      () => this.local.state(provider),
    );
  }
}
