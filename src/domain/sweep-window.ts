/**
 * The sweep's limits and window arithmetic without zod: what the sweep workflow runs. `sweep.ts` (with the zod schema
 * of its input) re-exports it.
 */

/** The limits a sweep run applies when its input leaves them out. */
export const sweepDefaults = { pageSize: 100, maxProviderPages: 20, maxStuckPages: 5 } as const;

/** The window `[fromMs, toMs)` of provider payments one sweep run compares. */
export interface SweepWindow {
  readonly fromMs: number;
  readonly toMs: number;
}

/** The settings of a sweep's input (`SweepInput` in sweep.ts) that place a run's window. */
export interface SweepWindowSettings {
  /** An explicit window (a backfill, a test) instead of the derived one. */
  readonly window?: SweepWindow | undefined;
  readonly lookbackMs: number;
  readonly windowMs?: number | undefined;
  readonly intervalMs: number;
}

/**
 * The window of the run anchored at `anchorMs` (its scheduled time): `[anchor - lookback - window, anchor - lookback)`.
 * Consecutive runs overlap by `windowMs - intervalMs`; flags are idempotent, so the overlap costs reads only.
 */
export function sweepWindow(input: SweepWindowSettings, anchorMs: number): SweepWindow {
  if (input.window) return input.window;
  const toMs = anchorMs - input.lookbackMs;
  return { fromMs: toMs - (input.windowMs ?? 2 * input.intervalMs), toMs };
}

/**
 * A window in the provider's unix seconds (`created_gte`, `created_lt`). Both ends are floored, so adjacent windows
 * stay adjacent: a payment created in the second of a boundary belongs to the later window.
 */
export const providerSeconds = (w: SweepWindow): { createdGte: number; createdLt: number } => ({
  createdGte: Math.floor(w.fromMs / 1000),
  createdLt: Math.floor(w.toMs / 1000),
});

/** How many review item ids a sweep result lists; the counts are always complete. */
export const maxListedReviewItems = 100;
