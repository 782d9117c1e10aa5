import { type WalletLedgerInput, checkWalletLedger } from '../../bench/wallet-check';
import { SPLIT_WALLET_PART, walletIdsOf, walletPartOf } from '../../bench/wallet-scenario';

const credit = (walletId: string, amount: number) => ({ walletId, kind: 'credit', amount, paymentKey: null });
const entry = (kind: string, key: string, amount: number, walletId = 'w0') => ({
  walletId,
  kind,
  amount,
  paymentKey: key,
});
/** Two payments on w0 (300 and 200) held and captured, from a wallet funded with 1000. */
const settled = (): WalletLedgerInput => ({
  wallets: [{ walletId: 'w0', balance: 500, held: 0 }],
  entries: [
    credit('w0', 1_000),
    entry('hold', 'k1', 300),
    entry('hold', 'k2', 200),
    entry('capture', 'k2', 200),
    entry('capture', 'k1', 300),
  ],
  payments: [
    { key: 'k1', wallet: { walletId: 'w0', amount: 300 } },
    { key: 'k2', wallet: { walletId: 'w0', amount: 200 } },
  ],
  funded: new Map([['w0', 1_000]]),
});

describe('checkWalletLedger (bench/wallet-check.ts)', () => {
  it('holds when balances are their entries and the funding less the wallet parts, each held and captured once', () => {
    expect(checkWalletLedger(settled())).toEqual([]);
  });

  it('finds a balance that is not the sum of its entries (and so not the funding less the parts)', () => {
    const input = settled();
    const problems = checkWalletLedger({ ...input, wallets: [{ walletId: 'w0', balance: 600, held: 0 }] });
    expect(problems).toEqual([
      "wallet w0: balance 600 != its entries' 500",
      'wallet w0: balance 600 != funded 1000 - parts 500',
    ]);
  });

  it('finds a part captured twice, or for another amount, and a hold never captured', () => {
    const input = settled();
    const twice = checkWalletLedger({
      ...input,
      wallets: [{ walletId: 'w0', balance: 300, held: 0 }],
      entries: [...input.entries, entry('capture', 'k2', 200)],
    });
    expect(twice).toContain('payment k2: 2 capture entries, not 1');
    const uncaptured = checkWalletLedger({
      ...input,
      wallets: [{ walletId: 'w0', balance: 800, held: 300 }],
      entries: input.entries.filter((e) => !(e.kind === 'capture' && e.paymentKey === 'k1')),
    });
    expect(uncaptured).toEqual([
      'wallet w0: 300 still held after every payment settled',
      'wallet w0: balance 800 != funded 1000 - parts 500',
      'payment k1: 0 capture entries, not 1',
    ]);
    const other = checkWalletLedger({
      ...input,
      wallets: [{ walletId: 'w0', balance: 499, held: 0 }],
      entries: input.entries.map((e) => (e.kind === 'capture' && e.paymentKey === 'k1' ? { ...e, amount: 301 } : e)),
    });
    expect(other).toContain('payment k1: capture of 301 on w0, not 300 on w0');
  });

  it('finds a released hold, entries of payments never sent, and a funded wallet that is gone', () => {
    const input = settled();
    const problems = checkWalletLedger({
      ...input,
      wallets: [{ walletId: 'w0', balance: 500, held: 0 }],
      entries: [...input.entries, entry('hold', 'k9', 50), entry('release', 'k9', 50), entry('release', 'k1', 0)],
      funded: new Map([
        ['w0', 1_000],
        ['w1', 1_000],
      ]),
    });
    expect(problems).toEqual([
      'wallet w1 was funded but is missing',
      'entries of payment k9, which the scenario never sent',
      'payment k1: its hold was released, yet it succeeded',
    ]);
  });

  it('checks each wallet against its own payments', () => {
    const problems = checkWalletLedger({
      wallets: [
        { walletId: 'w0', balance: 700, held: 0 },
        { walletId: 'w1', balance: 800, held: 0 },
      ],
      entries: [
        credit('w0', 1_000),
        credit('w1', 1_000),
        entry('hold', 'k1', 300, 'w0'),
        entry('capture', 'k1', 300, 'w0'),
        entry('hold', 'k2', 200, 'w1'),
        entry('capture', 'k2', 200, 'w1'),
      ],
      payments: [
        { key: 'k1', wallet: { walletId: 'w0', amount: 300 } },
        { key: 'k2', wallet: { walletId: 'w0', amount: 200 } },
      ],
      funded: new Map([
        ['w0', 1_000],
        ['w1', 1_000],
      ]),
    });
    expect(problems).toEqual([
      'wallet w0: balance 700 != funded 1000 - parts 500',
      'wallet w1: balance 800 != funded 1000 - parts 0',
      'payment k2: hold of 200 on w1, not 200 on w0',
      'payment k2: capture of 200 on w1, not 200 on w0',
    ]);
  });
});

describe('walletPartOf (bench/wallet-scenario.ts)', () => {
  it('takes the whole amount, round robin over the wallets, when the wallet covers all', () => {
    const part = walletPartOf({ covers: 'all', wallets: 3 });
    expect([0, 1, 2, 3].map((i) => part(i, 1_000 + i))).toEqual([
      { walletId: 'bench-w-0', amount: 1_000 },
      { walletId: 'bench-w-1', amount: 1_001 },
      { walletId: 'bench-w-2', amount: 1_002 },
      { walletId: 'bench-w-0', amount: 1_003 },
    ]);
  });

  it('takes the split part (never more than the amount), and nothing for card-only payments', () => {
    expect(walletPartOf({ covers: 'part', wallets: 1 })(7, 1_007)).toEqual({
      walletId: 'bench-w-0',
      amount: SPLIT_WALLET_PART,
    });
    expect(walletPartOf({ covers: 'part', wallets: 1 })(0, 100)?.amount).toBe(100);
    expect(walletPartOf({ covers: 'none', wallets: 0 })(0, 1_000)).toBeUndefined();
    expect(walletIdsOf({ covers: 'none', wallets: 4 })).toEqual([]);
  });
});
