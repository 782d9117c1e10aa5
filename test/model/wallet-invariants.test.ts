/**
 * The model's wallet checks (wallet-invariants.ts) on made-up ledgers, no servers: a consistent ledger passes, and each
 * rule fails on an input doctored to break it (an entry missing, a double capture, a release after success, ...).
 */
import type { InvariantEffect } from '../../bench/money-invariant';
import { type LedgerEntry, type WalletCase, type WalletCheckInput, checkWallets } from '../../bench/wallet-invariants';

type Step = [LedgerEntry['kind'], string, number, string?];

/** Entries of wallet `w1` of merchant `m` in order, with the running balance and held an honest ledger writes. */
function entries(steps: readonly Step[]): Required<LedgerEntry>[] {
  let balance = 0;
  let held = 0;
  return steps.map(([kind, key, amount, holdKey], i) => {
    balance += kind === 'credit' || kind === 'refund' ? amount : kind === 'capture' ? -amount : 0;
    held += kind === 'hold' ? amount : kind === 'capture' || kind === 'release' ? -amount : 0;
    return {
      seq: i + 1,
      merchantId: 'm',
      walletId: 'w1',
      operationId: `${kind}:m:${key}`,
      kind,
      amount,
      holdId: holdKey === undefined ? null : `hold:m:${holdKey}`,
      balanceAfter: balance,
      heldAfter: held,
    };
  });
}

/** p1 wallet-only, p2 split (500 of 2500) refunded 800 (500 wallet, 300 card), p3 split declined, p4 short funds. */
const honestSteps: Step[] = [
  ['credit', 'c1', 3_000],
  ['hold', 'p1', 1_000],
  ['capture', 'p1', 1_000, 'p1'],
  ['hold', 'p2', 500],
  ['capture', 'p2', 500, 'p2'],
  ['hold', 'p3', 700],
  ['release', 'p3', 700, 'p3'],
  ['refund', 'r1', 500, 'p2'],
];

const payment = (
  key: string,
  total: number,
  walletAmount: number,
  view: WalletCase['view'],
  refunds: WalletCase['refunds'] = [],
): WalletCase => ({
  merchantId: 'm',
  key,
  total,
  walletId: 'w1',
  walletAmount,
  view,
  createKey: `cre:${key}`,
  refunds,
});

const part = (amount: number, status: string, refunded = 0) => ({ walletId: 'w1', amount, status, refunded });
const effect = (operation: InvariantEffect['operation'], key: string, amount: number): InvariantEffect => ({
  operation,
  idempotency_key: key,
  reference: 'o',
  payment_id: 'pp2',
  amount,
});

function honest(): WalletCheckInput {
  const es = entries(honestSteps);
  const last = es.at(-1) as Required<LedgerEntry>;
  return {
    wallets: [{ merchantId: 'm', walletId: 'w1', balance: last.balanceAfter, held: last.heldAfter }],
    entries: es,
    payments: [
      payment('p1', 1_000, 1_000, { status: 'succeeded', wallet: part(1_000, 'captured') }),
      payment('p2', 2_500, 500, { status: 'succeeded', wallet: part(500, 'captured', 500) }, [
        { key: 'r1', amount: 800, providerKey: 'ref:r1' },
      ]),
      payment('p3', 1_000, 700, { status: 'declined', wallet: part(700, 'released') }),
      payment('p4', 5_000, 4_000, {
        status: 'declined',
        declineCode: 'wallet_insufficient_funds',
        wallet: part(4_000, 'released'),
      }),
    ],
    effects: [effect('create', 'cre:p2', 2_000), effect('refund', 'ref:r1', 300)],
    requests: [{ idempotency_key: 'cre:p2' }, { idempotency_key: 'cre:p3' }, { idempotency_key: 'ref:r1' }],
  };
}

/** The honest input with its entries rebuilt from `steps` (the wallet row follows them). */
function withSteps(steps: Step[]): WalletCheckInput {
  const es = entries(steps);
  const last = es.at(-1) as Required<LedgerEntry>;
  return {
    ...honest(),
    entries: es,
    wallets: [{ merchantId: 'm', walletId: 'w1', balance: last.balanceAfter, held: last.heldAfter }],
  };
}

const withPayment = (key: string, change: (p: WalletCase) => WalletCase): WalletCheckInput => {
  const input = honest();
  return { ...input, payments: input.payments.map((p) => (p.key === key ? change(p) : p)) };
};

const rules = (input: WalletCheckInput) => [...new Set(checkWallets(input).map((p) => p.slice(0, 2)))].sort();

describe('the model wallet checks', () => {
  it('pass an honest ledger', () => {
    expect(checkWallets(honest())).toEqual([]);
  });

  it('W1 fails when an entry is missing', () => {
    const input = honest();
    expect(rules({ ...input, entries: input.entries.filter((e) => e.seq !== 1) })).toContain('W1');
  });

  it('W1 fails when the wallet row disagrees with its entries', () => {
    const input = honest();
    expect(rules({ ...input, wallets: [{ merchantId: 'm', walletId: 'w1', balance: 2_100, held: 0 }] })).toEqual([
      'W1',
    ]);
  });

  it('W2 fails on a negative available', () => {
    expect(
      rules(
        withSteps([
          ['credit', 'c1', 500],
          ['hold', 'p9', 800],
        ]),
      ),
    ).toContain('W2');
  });

  it('W3 fails on a double capture', () => {
    expect(rules(withSteps([...honestSteps, ['capture', 'p1-again', 1_000, 'p1']]))).toContain('W3');
  });

  it('W3 fails on a release after success', () => {
    expect(rules(withSteps([...honestSteps, ['release', 'p2', 500, 'p2']]))).toContain('W3');
  });

  it('W3 fails when a succeeded payment was never captured', () => {
    expect(rules(withSteps(honestSteps.filter(([kind, key]) => !(kind === 'capture' && key === 'p1'))))).toContain(
      'W3',
    );
  });

  it('W3 fails when a declined payment was captured, or its hold never released', () => {
    const captured = honestSteps.map((s): Step => (s[0] === 'release' ? ['capture', 'p3', 700, 'p3'] : s));
    expect(rules(withSteps(captured))).toContain('W3');
    expect(rules(withSteps(honestSteps.filter(([kind]) => kind !== 'release')))).toContain('W3');
  });

  it('W3 fails when an open payment’s hold was settled', () => {
    expect(
      rules(withPayment('p3', (p) => ({ ...p, view: { status: 'unknown', wallet: part(700, 'held') } }))),
    ).toContain('W3');
  });

  it('W3 fails on a hold of no payment of the sequence, or of another amount', () => {
    expect(rules(withSteps([...honestSteps, ['hold', 'px', 100]]))).toEqual(['W3']);
    expect(rules(withPayment('p1', (p) => ({ ...p, walletAmount: 900, total: 900 })))).toContain('W3');
  });

  it('W4 fails when refunds return more than the wallet part captured', () => {
    expect(rules(withSteps([...honestSteps, ['refund', 'r2', 100, 'p2']]))).toContain('W4');
  });

  it('W5 fails when a wallet-only or short-funds payment reached the provider, or the card was charged the whole', () => {
    const input = honest();
    expect(rules({ ...input, requests: [...input.requests, { idempotency_key: 'cre:p1' }] })).toEqual(['W5']);
    expect(rules({ ...input, requests: [...input.requests, { idempotency_key: 'cre:p4' }] })).toEqual(['W5']);
    const whole = [effect('create', 'cre:p2', 2_500), effect('refund', 'ref:r1', 300)];
    expect(rules({ ...input, effects: whole })).toEqual(['W5']);
  });

  it('W6 fails when the view’s wallet part disagrees with the entries', () => {
    expect(rules(withPayment('p2', (p) => ({ ...p, view: { ...p.view, wallet: part(500, 'captured', 0) } })))).toEqual([
      'W6',
    ]);
    expect(rules(withPayment('p1', (p) => ({ ...p, view: { ...p.view, wallet: part(1_000, 'released') } })))).toEqual([
      'W6',
    ]);
  });

  it('W7 fails when the card is refunded before the wallet, or a refund’s shares do not add up', () => {
    const cardFirst = withSteps(honestSteps.map((s): Step => (s[0] === 'refund' ? ['refund', 'r1', 300, 'p2'] : s)));
    const cardFirstInput = {
      ...cardFirst,
      effects: [effect('create', 'cre:p2', 2_000), effect('refund', 'ref:r1', 500)],
      payments: cardFirst.payments.map((p) =>
        p.key === 'p2' ? { ...p, view: { ...p.view, wallet: part(500, 'captured', 300) } } : p,
      ),
    };
    expect(rules(cardFirstInput)).toEqual(['W7']);
    const input = honest();
    expect(rules({ ...input, effects: [effect('create', 'cre:p2', 2_000), effect('refund', 'ref:r1', 400)] })).toEqual([
      'W7',
    ]);
  });
});
