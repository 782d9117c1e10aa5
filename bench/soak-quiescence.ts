/**
 * How long the soak waits after its load for every payment to settle: derived from what the workers it drives are
 * configured to do, not a constant. An operation sent just before the load ended may spend its whole retry budget, then
 * the reconcile's whole schedule, and in it a resubmission with the same key at each check (its budget again each
 * time, while its outcome stays unknown); a resubmission
 * refused here (an open breaker, a cool-down) through the whole schedule is tried once more a wait twice the schedule's
 * last later (src/workflows/reconcile.ts), which settles it when the outage was shorter than that.
 */
import { type RetryCapabilities, type RetrySpec, retrySpecFor } from '../src/domain/retry-policy';

/** A margin for a loaded machine: workers restarting, workflow tasks timing out and being handed out again. */
export const QUIESCENCE_MARGIN_MS = 60_000;

/** What the window is made of, for the soak's log. */
export interface QuiescenceWindow {
  readonly ms: number;
  readonly writeBudgetMs: number;
  /** The sends that may each spend the write budget: the first call's and a resubmission at each check. */
  readonly sends: number;
  readonly scheduleMs: number;
  /** The first wait past the schedule for a resubmission still refused at its end: twice the schedule's last. */
  readonly refusedRetryMs: number;
}

/** The window for workers with these settings (the same environment the soak reads its config from). */
export function quiescenceWindow(settings: {
  readonly timings: { readonly reconcileScheduleMs: readonly number[] };
  readonly retry: Partial<Record<'create' | 'capture' | 'refund', Partial<RetrySpec>>>;
  readonly providerCapabilities: RetryCapabilities;
}): QuiescenceWindow {
  const writeBudgetMs = Math.max(
    ...(['create', 'capture', 'refund'] as const).map(
      (op) => retrySpecFor(op, settings.providerCapabilities, settings.retry[op]).budgetMs,
    ),
  );
  const schedule = settings.timings.reconcileScheduleMs;
  const scheduleMs = schedule.reduce((sum, ms) => sum + ms, 0);
  const refusedRetryMs = 2 * (schedule[schedule.length - 1] ?? 0);
  const sends = 1 + schedule.length;
  return {
    ms: sends * writeBudgetMs + scheduleMs + refusedRetryMs + QUIESCENCE_MARGIN_MS,
    writeBudgetMs,
    sends,
    scheduleMs,
    refusedRetryMs,
  };
}

/**
 * `quiescence window 1970 s (6 x the longest write budget 240 s (the first call and a resubmission at each check) + the
 * reconcile schedule 230 s + one check past it for a refused resubmission 240 s + 60 s margin)`.
 */
export function describeQuiescenceWindow(w: QuiescenceWindow, override?: number): string {
  const s = (ms: number) => `${Math.round(ms / 1000)} s`;
  const derived =
    `${w.sends} x the longest write budget ${s(w.writeBudgetMs)} (the first call and a resubmission at each check) + ` +
    `the reconcile schedule ${s(w.scheduleMs)} + ` +
    `one check past it for a refused resubmission ${s(w.refusedRetryMs)} + ${s(QUIESCENCE_MARGIN_MS)} margin`;
  return override === undefined
    ? `quiescence window ${s(w.ms)} (${derived})`
    : `quiescence window ${s(override)} (SOAK_QUIESCE_MS; the configuration's would be ${s(w.ms)}: ${derived})`;
}
