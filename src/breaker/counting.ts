/**
 * The breaker's counting strategy, apart from its state machine (cockatiel's split: `ConsecutiveBreaker` /
 * `SamplingBreaker` vs the breaker policy). It only answers "given this outcome, should the breaker open?". The
 * in-process store runs this class; the Redis store runs the same rules in its Lua script (`redis.ts`), and
 * `test/breaker/stores.test.ts` holds both to one table of cases.
 */

/** Trip on a failure rate over a sliding time window (cockatiel's `SamplingBreaker`). */
export interface SlidingWindowPolicy {
  /** Length of the window. */
  readonly durationMs: number;
  /** Failures / calls in the window at or above which the breaker opens, in (0, 1]. */
  readonly failureRate: number;
  /** Fewer calls than this in the window never trip it (a quiet provider is not judged on two calls). */
  readonly minimumCalls: number;
  /** How many buckets the window slides by. Default 10. */
  readonly buckets?: number;
}

/** What counts toward opening the breaker: consecutive failures, and optionally a failure rate over a window. */
export interface CountingPolicy {
  /** Consecutive unhealthy outcomes that open the breaker (cockatiel's `ConsecutiveBreaker`). */
  readonly consecutiveFailures: number;
  /** Absent: no rate-based trip. */
  readonly window?: SlidingWindowPolicy;
}

/** Width of one bucket of the sliding window, in ms. */
export const bucketMsOf = (window: SlidingWindowPolicy): number =>
  Math.max(1, Math.ceil(window.durationMs / (window.buckets ?? 10)));

/** Whether counts this large trip the breaker. Shared by the in-process counter and, as a rule, the Lua script. */
export const shouldTrip = (
  policy: CountingPolicy,
  consecutive: number,
  inWindow: { readonly calls: number; readonly failures: number },
): boolean =>
  consecutive >= policy.consecutiveFailures ||
  (policy.window !== undefined &&
    inWindow.calls >= policy.window.minimumCalls &&
    inWindow.failures >= policy.window.failureRate * inWindow.calls);

/** One provider's counts in this process: consecutive failures and time buckets of calls/failures. */
export class FailureCounter {
  #consecutive = 0;
  /** Bucket start (epoch ms) -> counts. */
  readonly #buckets = new Map<number, { calls: number; failures: number }>();

  constructor(private readonly policy: CountingPolicy) {}

  get consecutive(): number {
    return this.#consecutive;
  }

  /** Counts one outcome at `now`; true when the breaker should open. */
  record(healthy: boolean, now: number): boolean {
    this.#consecutive = healthy ? 0 : this.#consecutive + 1;
    const { window } = this.policy;
    let inWindow = { calls: 0, failures: 0 };
    if (window !== undefined) {
      const bucketMs = bucketMsOf(window);
      const start = now - (now % bucketMs);
      const bucket = this.#buckets.get(start) ?? { calls: 0, failures: 0 };
      bucket.calls += 1;
      if (!healthy) bucket.failures += 1;
      this.#buckets.set(start, bucket);
      for (const [at, counts] of this.#buckets) {
        // A bucket that started a whole window ago has slid out.
        if (at <= now - window.durationMs) this.#buckets.delete(at);
        else inWindow = { calls: inWindow.calls + counts.calls, failures: inWindow.failures + counts.failures };
      }
    }
    return !healthy && shouldTrip(this.policy, this.#consecutive, inWindow);
  }

  /** Forgets everything: the breaker opened or closed again. */
  reset(): void {
    this.#consecutive = 0;
    this.#buckets.clear();
  }
}
