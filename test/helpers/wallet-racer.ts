/**
 * A second process racing the test's own on one wallet: its own pool and ledger against the same database. Prints
 * `ready` once connected, waits for `go` on stdin (so both processes' holds overlap), runs its holds all at once and
 * prints one JSON line with each hold's outcome.
 */
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { createPool } from '../../src/db';
import type { Currency } from '../../src/domain/money';
import { WalletFailure } from '../../src/domain/wallet-errors';
import { WalletLedger } from '../../src/wallets';

export interface RacerSpec {
  readonly url: string;
  readonly merchantId: string;
  readonly walletId: string;
  readonly paymentKeys: readonly string[];
  readonly amount: number;
  readonly currency: string;
  readonly poolSize: number;
}

/** Each hold's outcome: `held`, `insufficient_funds`, or the failure type. */
export type RaceOutcome = string;

/**
 * Runs `spec`'s holds concurrently on `ledger` and answers their outcomes in order. A database failure is retried with
 * the same operation id, as the hold activity's retry policy does (bounded): on a loaded machine 200 holds on 16
 * connections can wait longer than the pool's acquisition bound, which applies nothing and is no answer about funds.
 */
export async function raceHolds(ledger: WalletLedger, spec: RacerSpec): Promise<RaceOutcome[]> {
  const retried = new Set<string>([WalletFailure.DatabaseNotApplied, WalletFailure.DatabaseOutcomeUnknown]);
  const hold = async (paymentKey: string): Promise<RaceOutcome> => {
    for (let attempt = 1; ; attempt += 1) {
      const outcome = await ledger
        .hold({
          merchantId: spec.merchantId,
          walletId: spec.walletId,
          paymentKey,
          amount: spec.amount,
          currency: spec.currency as Currency,
        })
        .then(
          (r) => r.status,
          (err: { type?: string }) => err.type ?? 'error',
        );
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
  const outcomes = await raceHolds(ledger, spec);
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
