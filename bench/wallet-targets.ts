/**
 * Issue 23's four wallet numbers of one `npm run bench` run, each against its target: the wallet-only payment's p50
 * one at a time, what a wallet part adds to a card payment one at a time (p50 difference), hot-wallet over spread
 * throughput at C=16, and the hold transaction's p50. Pure: from the scenarios' results.
 */

/** Whether a number met its target; `not measured` when its scenario(s) did not run (or measured nothing). */
export type TargetVerdict = 'met' | 'not met' | 'not measured';

/** One target and what the run measured. */
export interface TargetCheck {
  readonly id: 'wallet_only_p50_ms' | 'split_adds_p50_ms' | 'hot_over_spread' | 'hold_p50_ms';
  readonly what: string;
  /** Undefined: not measured. */
  readonly value: number | undefined;
  readonly unit: 'ms' | 'x';
  readonly bound: 'at most' | 'at least';
  readonly target: number;
  readonly verdict: TargetVerdict;
  /** The scenarios the number comes from. */
  readonly from: readonly string[];
}

/** The verdict of `value` against `target`. */
export function checkTarget(value: number | undefined, bound: TargetCheck['bound'], target: number): TargetVerdict {
  if (value === undefined || !Number.isFinite(value)) return 'not measured';
  return (bound === 'at most' ? value <= target : value >= target) ? 'met' : 'not met';
}

/** The parts of a scenario result the targets read. */
export interface WalletTargetSource {
  readonly id: string;
  readonly throughputPerS: number;
  readonly latencyMs: { readonly p50: number };
  readonly wallet?: { readonly holdMs: { readonly count: number; readonly p50: number } };
}

/** The scenario ids the targets are measured by (bench/run.ts declares them). */
export const walletScenarioIds = {
  walletOnly: 'wallet-only-c1',
  card: 'card-only-c1',
  split: 'wallet-split-c1',
  hot: 'wallet-hot',
  spread: 'wallet-spread',
} as const;

const round = (x: number, digits: number): number => Math.round(x * 10 ** digits) / 10 ** digits;

/** The four checks, from whichever of the wallet scenarios ran. */
export function walletTargets(results: readonly WalletTargetSource[]): TargetCheck[] {
  const by = (id: string) => results.find((r) => r.id === id);
  const ids = walletScenarioIds;
  const only = by(ids.walletOnly);
  const card = by(ids.card);
  const split = by(ids.split);
  const hot = by(ids.hot);
  const spread = by(ids.spread);
  const measured = (x: number | undefined) => (x === undefined || !Number.isFinite(x) ? undefined : x);
  // The hold's own p50 from the one-at-a-time wallet payments: the split payments' hold (a hold alone, on their
  // answer's path), else the wallet-only payments' debit (a hold and its capture in one transaction, in the API since
  // it answers them; bench/run.ts prints both).
  const holdSource = [split, only].find((r) => (r?.wallet?.holdMs.count ?? 0) > 0);
  const check = (
    id: TargetCheck['id'],
    what: string,
    value: number | undefined,
    unit: TargetCheck['unit'],
    bound: TargetCheck['bound'],
    target: number,
    from: readonly string[],
  ): TargetCheck => {
    const v = measured(value);
    const rounded = v === undefined ? undefined : round(v, unit === 'x' ? 2 : 1);
    return { id, what, value: rounded, unit, bound, target, verdict: checkTarget(rounded, bound, target), from };
  };
  return [
    check('wallet_only_p50_ms', 'wallet-only payment p50, one at a time', only?.latencyMs.p50, 'ms', 'at most', 30, [
      ids.walletOnly,
    ]),
    check(
      'split_adds_p50_ms',
      'split payment p50 - card payment p50, one at a time',
      split && card ? split.latencyMs.p50 - card.latencyMs.p50 : undefined,
      'ms',
      'at most',
      10,
      [ids.split, ids.card],
    ),
    check(
      'hot_over_spread',
      'payments/s on one hot wallet / spread over many, C=16',
      hot && spread && spread.throughputPerS > 0 ? hot.throughputPerS / spread.throughputPerS : undefined,
      'x',
      'at least',
      0.8,
      [ids.hot, ids.spread],
    ),
    check(
      'hold_p50_ms',
      "the hold transaction's p50 (a split payment's, one payment at a time)",
      holdSource?.wallet?.holdMs.p50,
      'ms',
      'at most',
      5,
      holdSource ? [holdSource.id] : [ids.split, ids.walletOnly],
    ),
  ];
}

/** `wallet-only payment p50, one at a time: 24.1 ms (target <= 30 ms): met`. */
export function targetLine(t: TargetCheck): string {
  const sign = t.bound === 'at most' ? '<=' : '>=';
  const value = t.value === undefined ? '-' : `${t.value}${t.unit === 'ms' ? ' ms' : ' x'}`;
  return `${t.what}: ${value} (target ${sign} ${t.target}${t.unit === 'ms' ? ' ms' : ' x'}): ${t.verdict}`;
}

/** The four in one line, e.g. `bench wallets: wallet-only p50 24.1 ms (<= 30 met), ...`. */
export function walletSummaryLine(checks: readonly TargetCheck[]): string {
  const short: Record<TargetCheck['id'], string> = {
    wallet_only_p50_ms: 'wallet-only p50',
    split_adds_p50_ms: 'split adds',
    hot_over_spread: 'hot/spread',
    hold_p50_ms: 'hold p50',
  };
  const part = (t: TargetCheck) =>
    `${short[t.id]} ${t.value === undefined ? '-' : t.value}${t.unit === 'ms' ? ' ms' : ' x'} ` +
    `(${t.bound === 'at most' ? '<=' : '>='} ${t.target} ${t.verdict})`;
  return `bench wallets: ${checks.map(part).join(', ')}`;
}
