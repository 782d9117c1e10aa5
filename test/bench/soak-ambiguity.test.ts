/**
 * The soak's time-to-resolution line (issue 21 §4) and its quiescence window: what they count from the views and
 * answers the soak reads, and what the window is made of.
 */
import { AmbiguityTally, ambiguityByKindLine, ambiguityLine } from '../../bench/soak-ambiguity';
import { QUIESCENCE_MARGIN_MS, describeQuiescenceWindow, quiescenceWindow } from '../../bench/soak-quiescence';

const T0 = Date.parse('2026-12-01T10:00:00Z');
const iso = (ms: number) => new Date(T0 + ms).toISOString();

describe('the ambiguity line', () => {
  it('counts unknown creates from their unknownSince to the final view, and 202 movements to their settled view', () => {
    const t = new AmbiguityTally();
    // A create unknown at +0, settled by its reconcile at +40 s (the view's updatedAt).
    t.observe('p1', { status: 'unknown', unknownSince: iso(0) }, T0 + 5_000);
    t.observe('p1', { status: 'succeeded', updatedAt: iso(40_000) }, T0 + 42_000);
    // A capture answered 202 at +10 s, seen settled at +30 s.
    t.movementAnswered('p2', 'capture', 'c1', 202, T0 + 10_000);
    t.observe('p2', { status: 'authorized', operations: [{ kind: 'capture', key: 'c1', state: 'running' }] }, T0);
    t.observe(
      'p2',
      { status: 'succeeded', operations: [{ kind: 'capture', key: 'c1', state: 'succeeded' }] },
      T0 + 30_000,
    );
    // A capture answered 200 at once was never unknown.
    t.movementAnswered('p2', 'capture', 'c2', 200, T0 + 11_000);
    const s = t.summary();
    expect(s).toMatchObject({ unknown: 2, settled: 2, open: 0, p50Ms: 20_000, p99Ms: 40_000, withoutOperatorPct: 100 });
    expect(ambiguityLine(s)).toBe('ambiguity: 2 unknown, p50 20.0 s, p99 40.0 s to final, 100.0 % without an operator');
    expect(ambiguityByKindLine(s)).toBe(
      'ambiguity by kind: capture 1 (p50 20.0 s, p99 20.0 s, max 20.0 s); create 1 (p50 40.0 s, p99 40.0 s, max 40.0 s)',
    );
  });

  it('a review an operator settled counts against "without an operator"; one still in review is not final', () => {
    const t = new AmbiguityTally();
    t.movementAnswered('p1', 'refund', 'r1', 202, T0);
    t.observe('p1', { status: 'needs_review', operations: [{ kind: 'refund', key: 'r1', state: 'needs_review' }] }, T0);
    t.operatorResolved('p1', { kind: 'refund', key: 'r1' });
    t.observe(
      'p1',
      { status: 'succeeded', operations: [{ kind: 'refund', key: 'r1', state: 'succeeded' }] },
      T0 + 60_000,
    );
    t.observe('p2', { status: 'needs_review', unknownSince: iso(0) }, T0 + 1_000);
    const s = t.summary();
    expect(s).toMatchObject({ unknown: 2, settled: 1, open: 1, withoutOperatorPct: 0 });
    expect(ambiguityLine(s)).toMatch(/, 0\.0 % without an operator; 1 not final at the end$/);
  });
});

describe('the quiescence window', () => {
  it('is the longest write budget for the first call and a resubmission at each check, the reconcile schedule, one check past it and a margin', () => {
    const w = quiescenceWindow({
      timings: { reconcileScheduleMs: [5_000, 15_000, 30_000, 60_000, 120_000] },
      retry: { create: { budgetMs: 240_000 }, capture: { budgetMs: 240_000 }, refund: { budgetMs: 100_000 } },
      providerCapabilities: { idempotencyKeys: true, keyTtlSeconds: 86_400 },
    });
    expect(w).toEqual({
      ms: 6 * 240_000 + 230_000 + 2 * 120_000 + QUIESCENCE_MARGIN_MS,
      writeBudgetMs: 240_000,
      sends: 6,
      scheduleMs: 230_000,
      refusedRetryMs: 240_000,
    });
    expect(describeQuiescenceWindow(w)).toBe(
      'quiescence window 1970 s (6 x the longest write budget 240 s (the first call and a resubmission at each ' +
        'check) + the reconcile schedule 230 s + ' +
        'one check past it for a refused resubmission 240 s + 60 s margin)',
    );
  });
});
