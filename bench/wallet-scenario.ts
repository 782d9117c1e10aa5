/**
 * The wallet scenarios' own parts (issue 23): funded wallets through the API's credit endpoint, each payment's wallet
 * part, and after the payments the wallets' money check on the `wallets` / `wallet_entries` tables
 * (bench/wallet-check.ts) with the holds' timings from the workers' ledger.
 */
import { randomUUID } from 'node:crypto';
import { request } from 'undici';
import type { PaymentOutcome, WalletPart } from './load';
import type { BenchWalletDatabase, ScenarioStack } from './stack';
import { type LatencySummary, summarize } from './stats';
import { checkWalletLedger, readWalletLedger, waitWalletsSettled } from './wallet-check';

/** How a scenario's payments use wallets. */
export interface WalletSpec {
  /**
   * What the wallet pays: `all` (the whole amount: no provider call), `part` ({@link SPLIT_WALLET_PART}, the card the
   * rest), `none` (a card-only payment on the same stack, wallets on: the split's reference).
   */
  readonly covers: 'all' | 'part' | 'none';
  /** Wallets the payments are spread over, round robin (1: every payment on one hot wallet). */
  readonly wallets: number;
}

/** A split payment's wallet part (minor units); the card is charged the rest (600-699 of 1000-1099). */
export const SPLIT_WALLET_PART = 400;

/** What each wallet is credited with before the warm-up: far more than a run's payments take. */
export const WALLET_FUNDING = 100_000_000;

/** What the wallet side of a scenario measured and found. */
export interface WalletScenarioResult {
  readonly covers: WalletSpec['covers'];
  readonly wallets: number;
  /**
   * The ledger transaction each first answer waited for during the measured batch, ms: a split payment's hold (the
   * workers' ledger), a wallet-only payment's debit (the API's, src/client/wallet-only.ts).
   */
  readonly holdMs: LatencySummary;
  /** The workers' debits of wallet-only payments (reading the API's decision back, after the answer), ms. */
  readonly workerDebitMs: LatencySummary;
  /** Payments (warm-up included) whose wallet part the check read back. */
  readonly checkedPayments: number;
  /** Whether every hold was settled (captured or released) within the wait. */
  readonly settled: boolean;
  /** The wallets' money check: empty when it held. */
  readonly problems: readonly string[];
}

/** The scenario's wallet ids (fresh per scenario: each has its own merchant too). */
export const walletIdsOf = (spec: WalletSpec): string[] =>
  spec.covers === 'none' ? [] : Array.from({ length: spec.wallets }, (_, i) => `bench-w-${i}`);

/** The wallet part of payment number `index`, `amount` in all (undefined: card only). */
export function walletPartOf(spec: WalletSpec): (index: number, amount: number) => WalletPart | undefined {
  const ids = walletIdsOf(spec);
  return (index, amount) => {
    const walletId = ids[index % Math.max(1, ids.length)];
    if (walletId === undefined || spec.covers === 'none') return undefined;
    return { walletId, amount: spec.covers === 'all' ? amount : Math.min(SPLIT_WALLET_PART, amount) };
  };
}

/** Credits every wallet of the scenario through `POST /v1/wallets/:id/credits`; answers what each was credited. */
export async function fundWallets(
  stack: Pick<ScenarioStack, 'url' | 'token'>,
  spec: WalletSpec,
): Promise<Map<string, number>> {
  const funded = new Map<string, number>();
  for (const walletId of walletIdsOf(spec)) {
    const res = await request(`${stack.url}/v1/wallets/${walletId}/credits`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${stack.token}`,
        'idempotency-key': `fund_${randomUUID()}`,
        'content-type': 'application/json',
      },
      body: JSON.stringify({ amount: { value: WALLET_FUNDING, currency: 'EUR' }, reason: 'bench funding' }),
      headersTimeout: 20_000,
      bodyTimeout: 20_000,
    });
    const text = await res.body.text();
    if (res.statusCode !== 200) throw new Error(`funding wallet ${walletId}: ${res.statusCode} ${text.slice(0, 200)}`);
    funded.set(walletId, WALLET_FUNDING);
  }
  return funded;
}

/**
 * After the payments answered: waits until their holds settled (bounded), reads the merchant's wallets and entries
 * and checks them against the payments (bench/wallet-check.ts); `ledgerMs` are the measured batch's ledger timings.
 */
export async function checkScenarioWallets(
  db: BenchWalletDatabase,
  stack: Pick<ScenarioStack, 'merchantId'>,
  spec: WalletSpec,
  outcomes: readonly PaymentOutcome[],
  funded: ReadonlyMap<string, number>,
  ledgerMs: { readonly answerMs: readonly number[]; readonly workerDebitMs: readonly number[] },
): Promise<WalletScenarioResult> {
  const payments = outcomes.flatMap((o) => (o.wallet === undefined ? [] : [{ key: o.key, wallet: o.wallet }]));
  const settled = await waitWalletsSettled(db.pool, stack.merchantId, payments.length, 30_000);
  const ledger = await readWalletLedger(db.pool, stack.merchantId);
  const problems = checkWalletLedger({ ...ledger, payments, funded });
  return {
    covers: spec.covers,
    wallets: walletIdsOf(spec).length,
    holdMs: summarize(ledgerMs.answerMs),
    workerDebitMs: summarize(ledgerMs.workerDebitMs),
    checkedPayments: payments.length,
    settled,
    problems,
  };
}
