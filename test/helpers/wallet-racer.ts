/**
 * A second process racing the test's own on one wallet: its own pool and ledger against the same database. Prints
 * `ready` once connected, waits for `go` on stdin (so both processes' holds overlap), runs its holds all at once and
 * prints one JSON line with each hold's outcome. A `legacy` racer holds statement by statement in a transaction of its
 * own (lock, read, write: the ledger's hold before migration 0005), as a process of the previous release does.
 */
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import type pg from 'pg';
import { createPool, inTransaction, isDatabaseError } from '../../src/db';
import type { Currency } from '../../src/domain/money';
import { WalletFailure } from '../../src/domain/wallet-errors';
import { WalletLedger } from '../../src/wallets';
import { appendEntry, entriesOf, lockWallet } from '../../src/wallets/steps';

export interface RacerSpec {
  readonly url: string;
  readonly merchantId: string;
  readonly walletId: string;
  readonly paymentKeys: readonly string[];
  readonly amount: number;
  readonly currency: string;
  readonly poolSize: number;
  /** Hold as the previous release did, statement by statement (see {@link legacyHold}). */
  readonly legacy?: boolean;
}

/** The hold of the release before migration 0005: lock, read the key's entries, write, in one transaction. */
export async function legacyHold(pool: pg.Pool, spec: RacerSpec, paymentKey: string): Promise<RaceOutcome> {
  const { merchantId, walletId, amount } = spec;
  const holdId = `hold:${merchantId}:${paymentKey}`;
  const once = () =>
    inTransaction(pool, async (db): Promise<RaceOutcome> => {
      const wallet = await lockWallet(db, merchantId, walletId);
      if (wallet === undefined) return WalletFailure.WalletNotFound;
      const related = await entriesOf(db, merchantId, [holdId], holdId);
      if (related.some((e) => e.operation_id === holdId)) return 'held';
      if (related.some((e) => e.kind === 'release')) return WalletFailure.HoldSettled;
      if (Number(wallet.balance) - Number(wallet.held) < amount) return 'insufficient_funds';
      await appendEntry(db, merchantId, walletId, {
        operationId: holdId,
        kind: 'hold',
        amount,
        balanceDelta: 0,
        heldDelta: amount,
        paymentKey,
      });
      return 'held';
    });
  // A UNIQUE violation: a racer the lock did not order committed the same id first; once more reads it.
  return once().catch((err: unknown) => {
    if (isDatabaseError(err) && err.code === '23505') return once();
    throw err;
  });
}

/** Each hold's outcome: `held`, `insufficient_funds`, or the failure type. */
export type RaceOutcome = string;

/**
 * Runs `spec`'s holds concurrently on `ledger` and answers their outcomes in order. A database failure is retried with
 * the same operation id, as the hold activity's retry policy does (bounded): on a loaded machine 200 holds on 16
 * connections can wait longer than the pool's acquisition bound, which applies nothing and is no answer about funds.
 */
export async function raceHolds(ledger: WalletLedger, spec: RacerSpec, pool?: pg.Pool): Promise<RaceOutcome[]> {
  const retried = new Set<string>([WalletFailure.DatabaseNotApplied, WalletFailure.DatabaseOutcomeUnknown]);
  const once = (paymentKey: string): Promise<RaceOutcome> =>
    spec.legacy && pool !== undefined
      ? legacyHold(pool, spec, paymentKey)
      : ledger
          .hold({
            merchantId: spec.merchantId,
            walletId: spec.walletId,
            paymentKey,
            amount: spec.amount,
            currency: spec.currency as Currency,
          })
          .then((r) => r.status);
  const hold = async (paymentKey: string): Promise<RaceOutcome> => {
    for (let attempt = 1; ; attempt += 1) {
      const outcome = await once(paymentKey).catch((err: { type?: string }) => err.type ?? 'error');
      if (!retried.has(outcome) || attempt === 10) return outcome;
      await new Promise((r) => setTimeout(r, 50 * attempt));
    }
  };
  return Promise.all(spec.paymentKeys.map(hold));
}

/** A racer process, ready (connected); `go()` starts its holds and answers their outcomes. */
export async function spawnRacer(spec: RacerSpec): Promise<{ go(): Promise<RaceOutcome[]> }> {
  const child = spawn(process.execPath, ['--import', 'tsx', __filename], {
    env: { ...process.env, PW_RACER_SPEC: JSON.stringify(spec) },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  const lines = createInterface({ input: child.stdout });
  const next = () => new Promise<string>((resolve) => lines.once('line', resolve));
  let stderr = '';
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  const ready = await Promise.race([
    next(),
    new Promise<string>((_, reject) =>
      child.once('exit', (code) => reject(new Error(`racer exited ${code}: ${stderr}`))),
    ),
  ]);
  if (ready !== 'ready') throw new Error(`racer said ${ready}: ${stderr}`);
  return {
    async go() {
      const answer = next();
      child.stdin.write('go\n');
      return JSON.parse(await answer) as RaceOutcome[];
    },
  };
}

async function main() {
  const spec = JSON.parse(process.env.PW_RACER_SPEC ?? '{}') as RacerSpec;
  const pool = createPool({ url: spec.url, poolSize: spec.poolSize });
  // Open every connection before `go`, so the race is between holds, not connection set-ups.
  const clients = await Promise.all(Array.from({ length: spec.poolSize }, () => pool.connect()));
  for (const c of clients) c.release();
  const ledger = new WalletLedger(pool);
  const stdin = createInterface({ input: process.stdin });
  process.stdout.write('ready\n');
  await new Promise((resolve) => stdin.once('line', resolve));
  const outcomes = await raceHolds(ledger, spec, pool);
  process.stdout.write(`${JSON.stringify(outcomes)}\n`);
  await pool.end();
  stdin.close();
}

if (require.main === module) {
  main().catch((err: unknown) => {
    console.error(err);
    process.exit(1);
  });
}
