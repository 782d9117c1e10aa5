/**
 * When a supervised process crashed: wait how long before restarting it, or give up. Counts crashes in a sliding
 * window (what it counts) apart from the supervisor that spawns and kills (what it does); the clock is injected.
 */
export interface CrashPolicyOptions {
  /** Give up when this many crashes fall within `windowMs` (default 5 within 60 s). */
  readonly maxCrashes?: number;
  readonly windowMs?: number;
  /** First restart delay, doubled per crash in the window, capped at `maxDelayMs` (default 500 ms to 10 s). */
  readonly initialDelayMs?: number;
  readonly maxDelayMs?: number;
  readonly now?: () => number;
}

/** The verdict on one crash. */
export type CrashVerdict =
  | { readonly action: 'restart'; readonly delayMs: number; readonly crashesInWindow: number }
  | { readonly action: 'give_up'; readonly crashesInWindow: number };

/** One process's crash history. */
export class CrashPolicy {
  private readonly crashes: number[] = [];
  readonly maxCrashes: number;
  readonly windowMs: number;
  private readonly initialDelayMs: number;
  private readonly maxDelayMs: number;
  private readonly now: () => number;

  constructor(options: CrashPolicyOptions = {}) {
    this.maxCrashes = options.maxCrashes ?? 5;
    this.windowMs = options.windowMs ?? 60_000;
    this.initialDelayMs = options.initialDelayMs ?? 500;
    this.maxDelayMs = options.maxDelayMs ?? 10_000;
    this.now = options.now ?? Date.now;
    if (this.maxCrashes < 1) throw new RangeError('maxCrashes must be at least 1');
  }

  /** Records a crash now and says what to do about it. */
  crashed(): CrashVerdict {
    const now = this.now();
    this.crashes.push(now);
    while (this.crashes.length > 0 && (this.crashes[0] ?? now) <= now - this.windowMs) this.crashes.shift();
    const crashesInWindow = this.crashes.length;
    if (crashesInWindow >= this.maxCrashes) return { action: 'give_up', crashesInWindow };
    const delayMs = Math.min(this.maxDelayMs, this.initialDelayMs * 2 ** (crashesInWindow - 1));
    return { action: 'restart', delayMs, crashesInWindow };
  }
}
