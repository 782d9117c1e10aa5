import {
  type WalletTargetSource,
  checkTarget,
  targetLine,
  walletScenarioIds as ids,
  walletSummaryLine,
  walletTargets,
} from '../../bench/wallet-targets';

const result = (
  id: string,
  p50: number,
  throughputPerS = 10,
  holdP50?: number,
  holds = holdP50 === undefined ? 0 : 40,
): WalletTargetSource => ({
  id,
  throughputPerS,
  latencyMs: { p50 },
  ...(holdP50 === undefined ? {} : { wallet: { holdMs: { count: holds, p50: holdP50 } } }),
});

describe('checkTarget (bench/wallet-targets.ts)', () => {
  it('meets an upper bound at or below it, a lower bound at or above it', () => {
    expect(checkTarget(30, 'at most', 30)).toBe('met');
    expect(checkTarget(30.1, 'at most', 30)).toBe('not met');
    expect(checkTarget(0.8, 'at least', 0.8)).toBe('met');
    expect(checkTarget(0.79, 'at least', 0.8)).toBe('not met');
  });

  it('never calls a number it has not got met', () => {
    expect(checkTarget(undefined, 'at most', 30)).toBe('not measured');
    expect(checkTarget(Number.NaN, 'at most', 30)).toBe('not measured');
    expect(checkTarget(Number.POSITIVE_INFINITY, 'at least', 0.8)).toBe('not measured');
  });
});

describe('walletTargets (bench/wallet-targets.ts)', () => {
  it('measures the four numbers from their scenarios and checks each against its target', () => {
    const checks = walletTargets([
      result(ids.walletOnly, 24.26, 30, 1.84),
      result(ids.card, 31.5),
      result(ids.split, 45.0, 20, 2.5),
      result(ids.hot, 0, 40),
      result(ids.spread, 0, 64),
      result('api-bulkhead-c1', 12),
    ]);
    expect(checks.map((c) => [c.id, c.value, c.verdict, c.from])).toEqual([
      ['wallet_only_p50_ms', 24.3, 'met', [ids.walletOnly]],
      ['split_adds_p50_ms', 13.5, 'not met', [ids.split, ids.card]],
      ['hot_over_spread', 0.63, 'not met', [ids.hot, ids.spread]],
      ['hold_p50_ms', 2.5, 'met', [ids.split]],
    ]);
  });

  it('reports a number whose scenarios did not (all) run as not measured', () => {
    const checks = walletTargets([result(ids.split, 40, 20), result(ids.hot, 0, 40), result(ids.spread, 0, 0)]);
    expect(checks.map((c) => [c.id, c.value, c.verdict])).toEqual([
      ['wallet_only_p50_ms', undefined, 'not measured'],
      ['split_adds_p50_ms', undefined, 'not measured'],
      ['hot_over_spread', undefined, 'not measured'],
      ['hold_p50_ms', undefined, 'not measured'],
    ]);
  });

  it("takes the hold's p50 from the split payments, else from the wallet-only payments' debit", () => {
    const [, , , hold] = walletTargets([result(ids.walletOnly, 20, 30, 1.84), result(ids.split, 30, 20, 6.04)]);
    expect(hold).toMatchObject({ value: 6, verdict: 'not met', from: [ids.split] });
    const [, , , debit] = walletTargets([
      result(ids.walletOnly, 20, 30, 6.04),
      result(ids.split, 30, 20, Number.NaN, 0),
    ]);
    expect(debit).toMatchObject({ value: 6, verdict: 'not met', from: [ids.walletOnly] });
  });

  it('prints each target with its bound and verdict, and all four in one line', () => {
    const checks = walletTargets([
      result(ids.walletOnly, 24.26, 30, 1.84),
      result(ids.hot, 0, 40),
      result(ids.spread, 0, 40),
    ]);
    expect(targetLine(checks[0]!)).toBe('wallet-only payment p50, one at a time: 24.3 ms (target <= 30 ms): met');
    expect(targetLine(checks[1]!)).toBe(
      'split payment p50 - card payment p50, one at a time: - (target <= 10 ms): not measured',
    );
    expect(walletSummaryLine(checks)).toBe(
      'bench wallets: wallet-only p50 24.3 ms (<= 30 met), split adds - ms (<= 10 not measured), ' +
        'hot/spread 1 x (>= 0.8 met), hold p50 1.8 ms (<= 5 met)',
    );
  });
});
