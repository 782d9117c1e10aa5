/** How {@link forEachBounded} may be stopped early. */
export interface BoundedOptions {
  /**
   * Once aborted, no new item starts; the items already started run to their end and the call resolves (an abort is
   * no failure: the caller asked for it, e.g. a run's deadline).
   */
  readonly signal?: AbortSignal;
}

/**
 * A small worker pool: `fn` over every item, at most `concurrency` at once, each item once, started in order. Resolves
 * when every item is done (or, with `signal`, once it aborted and the items started are done); the first rejection
 * rejects it once the items already started have ended (no new item starts after it), so `fn` should catch what it
 * can answer itself.
 */
export async function forEachBounded<T>(
  items: readonly T[],
  concurrency: number,
  fn: (item: T, index: number) => Promise<void>,
  { signal }: BoundedOptions = {},
): Promise<void> {
  if (!Number.isInteger(concurrency) || concurrency < 1)
    throw new Error(`concurrency must be >= 1, not ${concurrency}`);
  let next = 0;
  let failed = false;
  const worker = async (): Promise<void> => {
    while (!failed && !signal?.aborted && next < items.length) {
      const index = next++;
      try {
        await fn(items[index] as T, index);
      } catch (err) {
        failed = true;
        throw err;
      }
    }
  };
  const results = await Promise.allSettled(Array.from({ length: Math.min(concurrency, items.length) }, worker));
  const rejected = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (rejected) throw rejected.reason;
}

/** The whole numbers `from`, `from + 1`, ... below `to` (none when `to <= from`): the items of an index pool. */
export const indices = (from: number, to: number): number[] =>
  Array.from({ length: Math.max(0, to - from) }, (_, i) => from + i);
