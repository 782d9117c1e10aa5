/**
 * The soak's wallet verdict (bench/soak-wallets.ts) on made-up reads, no servers: a consistent set of wallets, entries,
 * views and provider ledger passes; a doubled capture, a missing release, a wrong card amount, a provider call of a
 * wallet-only payment, an entry of no payment and a lost credit each fail, counted as double effects or mismatches.
 * And the soak's money verdict (bench/soak-check.ts) counts a split payment by its card side.
 */
import { type SoakAnswer, type SoakPayment, type SoakView, checkSoak } from '../../bench/soak-check';
import {
  type SoakCredit,
  type SoakWalletEntry,
  type SoakWalletInput,
  type SoakWalletPayment,
  type SoakWalletRead,
  checkSoakWallets,
  ledgerEntriesOf,
  walletSummaryLine,
} from '../../bench/soak-wallets';
import { providerIdempotencyKey } from '../../src/activities/keys';
import type { LedgerEffect } from '../../src/simulator/server';

const merchant = 'm1';
const pk = (op: 'create' | 'refund', key: string) => providerIdempotencyKey(merchant, op, key);
const entry = (kind: SoakWalletEntry['kind'], key: string, amount: number, paymentKey?: string): SoakWalletEntry => ({
  operationId: `${kind}:${merchant}:${key}`,
  kind,
  amount,
  ...(paymentKey === undefined ? {} : { paymentKey }),
});
const effect = (operation: LedgerEffect['operation'], key: string, amount: number): LedgerEffect => ({
  api_key: 'sk',
  operation,
  idempotency_key: key,
  reference: 'order-p1',
  payment_id: 'pay_p1',
  amount,
  at: 0,
});
const part = (walletId: string, amount: number, status: string, refunded = 0) => ({
  walletId,
  amount,
  status,
  refunded,
});

/**
 * wA (credited 10,000): p1 split 1,000 of 3,000 succeeded, refunded 1,500 (1,000 to the wallet, 500 to the card); p2
 * wallet-only 2,000 succeeded; p3 split 500 of 4,000 declined by the card (its hold released). wB (credited 1,000): p4
 * asks 2,000 of it, declined wallet_insufficient_funds, nothing held.
 */
function consistent(): SoakWalletInput {
  const wallets: SoakWalletRead[] = [
    {
      walletId: 'wA',
      wallet: { balance: 8_000, held: 0 },
      entries: [
        entry('credit', 'c1', 10_000),
        entry('hold', 'p1', 1_000, 'p1'),
        entry('hold', 'p2', 2_000, 'p2'),
        entry('capture', 'p2', 2_000, 'p2'),
        entry('hold', 'p3', 500, 'p3'),
        entry('capture', 'p1', 1_000, 'p1'),
        entry('release', 'p3', 500, 'p3'),
        entry('refund', 'r1', 1_000, 'p1'),
      ],
    },
    { walletId: 'wB', wallet: { balance: 1_000, held: 0 }, entries: [entry('credit', 'c2', 1_000)] },
  ];
  const credits: SoakCredit[] = [
    { walletId: 'wA', key: 'c1', amount: 10_000, status: 200 },
    { walletId: 'wB', key: 'c2', amount: 1_000, status: 200 },
  ];
  const payments: SoakWalletPayment[] = [
    {
      key: 'p1',
      total: 3_000,
      wallet: { walletId: 'wA', amount: 1_000 },
      view: { status: 'succeeded', wallet: part('wA', 1_000, 'captured', 1_000) },
      refunds: [{ key: 'r1', amount: 1_500 }],
    },
    {
      key: 'p2',
      total: 2_000,
      wallet: { walletId: 'wA', amount: 2_000 },
      view: { status: 'succeeded', wallet: part('wA', 2_000, 'captured') },
      refunds: [],
    },
    {
      key: 'p3',
      total: 4_000,
      wallet: { walletId: 'wA', amount: 500 },
      view: { status: 'declined', declineCode: 'card_declined', wallet: part('wA', 500, 'released') },
      refunds: [],
    },
    {
      key: 'p4',
      total: 5_000,
      wallet: { walletId: 'wB', amount: 2_000 },
      view: {
        status: 'declined',
        declineCode: 'wallet_insufficient_funds',
        wallet: part('wB', 2_000, 'released'),
      },
      refunds: [],
    },
  ];
  return {
    merchantId: merchant,
    wallets,
    credits,
    payments,
    ledger: {
      effects: [effect('create', pk('create', 'p1'), 2_000), effect('refund', pk('refund', 'r1'), 500)],
      requests: [
        { idempotency_key: pk('create', 'p1') },
        { idempotency_key: pk('create', 'p3') },
        { idempotency_key: pk('refund', 'r1') },
      ],
    },
  };
}

/** wA's read changed by `change` (its entries and balance). */
function withWalletA(change: (w: SoakWalletRead) => SoakWalletRead): SoakWalletInput {
  const input = consistent();
  return { ...input, wallets: input.wallets.map((w) => (w.walletId === 'wA' ? change(w) : w)) };
}

describe('the soak wallet verdict (bench/soak-wallets.ts)', () => {
  it('passes a consistent set: split, wallet-only, card-declined and short-funds payments, a wallet-first refund', () => {
    expect(checkSoakWallets(consistent())).toEqual({ doubleEffects: 0, mismatches: 0, problems: [] });
  });

  it('fails on a doubled capture entry: a double effect naming the payment', () => {
    // The same capture applied twice, the wallet's balance following its entries (7,000): only the double is wrong.
    const v = checkSoakWallets(
      withWalletA((w) => ({
        ...w,
        wallet: { balance: 7_000, held: 0 },
        entries: [...w.entries, entry('capture', 'p1', 1_000, 'p1')],
      })),
    );
    expect(v.doubleEffects).toBeGreaterThanOrEqual(2);
    expect(v.problems).toContainEqual(expect.stringMatching(/^double: W1: operation capture:m1:p1 applied 2 times/));
    expect(v.problems).toContainEqual(expect.stringMatching(/^double: W3: m1\/p1 .*hold ended more than once/));
  });

  it('fails on a missing release: the declined payment keeps its hold', () => {
    const v = checkSoakWallets(
      withWalletA((w) => ({
        ...w,
        wallet: { balance: 8_000, held: 500 },
        entries: w.entries.filter((e) => e.kind !== 'release'),
      })),
    );
    expect(v.doubleEffects).toBe(0);
    expect(v.mismatches).toBeGreaterThanOrEqual(1);
    expect(v.problems).toContainEqual(expect.stringMatching(/^mismatch: W3: m1\/p3 .*hold of 500 was never released/));
  });

  it('fails on a wrong card amount: the split charged the card the whole, not amount - wallet.amount', () => {
    const input = consistent();
    const v = checkSoakWallets({
      ...input,
      ledger: {
        ...input.ledger,
        effects: [effect('create', pk('create', 'p1'), 3_000), ...input.ledger.effects.slice(1)],
      },
    });
    expect(v.problems).toEqual([
      "mismatch: W5: m1/p1 (succeeded): the provider's create is for 3000, the card part is 2000",
    ]);
  });

  it('fails when a wallet-only payment made a provider call', () => {
    const input = consistent();
    const called = checkSoakWallets({
      ...input,
      ledger: { ...input.ledger, requests: [...input.ledger.requests, { idempotency_key: pk('create', 'p2') }] },
    });
    expect(called.problems).toEqual([expect.stringMatching(/^mismatch: W5: m1\/p2 .*wallet-only/)]);
  });

  it('fails on an entry of a payment the soak does not know, and on a credit answered 200 but not applied', () => {
    const stranger = checkSoakWallets(
      withWalletA((w) => ({
        ...w,
        wallet: { balance: 8_000, held: 300 },
        entries: [...w.entries, entry('hold', 'px', 300, 'px')],
      })),
    );
    expect(stranger.problems).toEqual([expect.stringMatching(/^mismatch: W3: wallet m1\/wA holds 300 for hold:m1:px/)]);
    const input = consistent();
    const lost = checkSoakWallets({
      ...input,
      credits: [...input.credits, { walletId: 'wB', key: 'c3', amount: 700, status: 200 }],
    });
    expect(lost.problems).toEqual(['mismatch: wallet wB: credit c3 of 700 was answered 200, yet it has no entry']);
  });

  it('does not judge a payment whose view could not be read, and does not call its entries unknown', () => {
    const input = consistent();
    const v = checkSoakWallets({
      ...input,
      payments: input.payments.map((p) => (p.key === 'p3' ? { ...p, view: undefined } : p)),
    });
    expect(v.problems).toEqual([]);
  });

  it('summarizes the shapes and outcomes', () => {
    expect(walletSummaryLine(consistent().payments, 1)).toBe(
      'wallet payments: 5 (3 split, 1 wallet-only, 1 refused): succeeded 2, declined (card_declined) 1, ' +
        'insufficient funds 1; 1 refunded to their wallet (1000 in all)',
    );
  });
});

describe('the soak money verdict of payments with a wallet part (bench/soak-check.ts)', () => {
  const input = consistent();
  const entries = ledgerEntriesOf(merchant, input.wallets);
  const soakPayment = (p: SoakWalletPayment): SoakPayment => ({
    key: p.key,
    orderId: `order-${p.key}`,
    amount: p.total,
    capture: 'automatic',
    declines: false,
    wallet: p.wallet,
  });
  const payments = input.payments.map(soakPayment);
  const answers: SoakAnswer[] = [
    { payment: 'p1', kind: 'charge', opKey: 'p1', amount: 3_000, status: 200, bodyStatus: 'succeeded' },
    { payment: 'p1', kind: 'refund', opKey: 'r1', amount: 1_500, status: 200, bodyStatus: 'succeeded' },
    { payment: 'p2', kind: 'charge', opKey: 'p2', amount: 2_000, status: 200, bodyStatus: 'succeeded' },
    { payment: 'p3', kind: 'charge', opKey: 'p3', amount: 4_000, status: 200, bodyStatus: 'declined' },
    { payment: 'p4', kind: 'charge', opKey: 'p4', amount: 5_000, status: 200, bodyStatus: 'declined' },
  ];
  const card = { amountAuthorized: 0, amountCaptured: 0, amountRefunded: 0 };
  const views = new Map<string, SoakView>([
    [
      'p1',
      {
        status: 'succeeded',
        amountAuthorized: 2_000,
        amountCaptured: 2_000,
        amountRefunded: 500,
        providerPaymentId: 'pay_p1',
        operations: [{ kind: 'refund', key: 'r1', state: 'succeeded' }],
      },
    ],
    ['p2', { status: 'succeeded', ...card }],
    ['p3', { status: 'declined', ...card }],
    ['p4', { status: 'declined', ...card }],
  ]);

  it("holds a split payment to its card side: the refund's card share, no provider create of a wallet-only one", () => {
    const v = checkSoak(merchant, payments, answers, views, input.ledger, new Map(), entries);
    expect(v).toMatchObject({ payments: 4, doubleEffects: 0, stuck: 0, mismatches: 0 });
  });

  it('without the wallet entries the refund of 1,500 contradicts the provider refund of 500', () => {
    const v = checkSoak(merchant, payments, answers, views, input.ledger, new Map(), []);
    expect(v.mismatches).toBeGreaterThan(0);
    expect(v.problems.join('\n')).toContain("the provider's refund is 500");
  });
});
