/**
 * `npm run bench:wallets`: the wallet ledger's hold on a real, durable PostgreSQL (its own server: fsync on, the
 * machine's binaries or the npm package's), through the ledger a wallet activity calls.
 *   1. the hold transaction one at a time: p50 / p95 / p99 (target p50 <= 5 ms);
 *   2. holds at concurrency 16 on one hot wallet vs spread over 64 wallets: holds per second and the ratio (every hold
 *      of one wallet waits for the row lock of the one before it; spread ones only share the WAL flush).
 * Options: `--holds N` (one at a time, default 500), `--load N` (per concurrent run, default 3000).
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { startPostgresServer } from '../scripts/lib/postgres-server';
import { openDatabase } from '../src/db';
import { WalletLedger } from '../src/wallets';
import { forEachBounded, indices } from './bounded';
import { percentile } from './stats';

const arg = (name: string, fallback: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i === -1 ? fallback : Number(process.argv[i + 1]);
};
const sequential = arg('holds', 500);
const load = arg('load', 3_000);
const concurrency = 16;

async function main() {
  const server = await startPostgresServer({ dir: mkdtempSync(path.join(os.tmpdir(), 'pw-bench-wallets-')) });
  const db = await openDatabase(
    { url: await server.createDatabase('payments'), poolSize: concurrency },
    pino({ level: 'silent' }),
  );
  const ledger = new WalletLedger(db.pool);
  const m = 'bench';
  const fund = async (walletId: string, value: number) =>
    ledger.credit(m, walletId, `fund-${walletId}`, { amount: { value, currency: 'EUR' } });
  const hold = (walletId: string) =>
    ledger.hold({ merchantId: m, walletId, paymentKey: randomUUID(), amount: 1, currency: 'EUR' });
  try {
    console.log(`PostgreSQL ${server.version} (${server.bin.source}), fsync on; pool ${concurrency}`);
    // 1. One at a time.
    await fund('solo', 1_000_000);
    for (let i = 0; i < 50; i++) await hold('solo'); // warm-up: connections, plans
    const times: number[] = [];
    for (let i = 0; i < sequential; i++) {
      const t = process.hrtime.bigint();
      await hold('solo');
      times.push(Number(process.hrtime.bigint() - t) / 1e6);
    }
    times.sort((a, b) => a - b);
    const [p50, p95, p99] = [50, 95, 99].map((p) => percentile(times, p).toFixed(2));
    console.log(
      `hold, one at a time (${sequential}): p50 ${p50} ms, p95 ${p95} ms, p99 ${p99} ms (target p50 <= 5 ms)`,
    );

    // 2. Hot wallet vs spread, C=16.
    const run = async (walletOf: (i: number) => string) => {
      const started = Date.now();
      await forEachBounded(indices(0, load), concurrency, async (i) => {
        const r = await hold(walletOf(i));
        if (r.status !== 'held') throw new Error(`hold ${r.status}`);
      });
      return load / ((Date.now() - started) / 1000);
    };
    await fund('hot', 1_000_000);
    const spread = Array.from({ length: 64 }, (_, i) => `spread-${i}`);
    for (const w of spread) await fund(w, 1_000_000);
    const hot = await run(() => 'hot');
    const wide = await run((i) => spread[i % spread.length] as string);
    console.log(
      `holds at C=${concurrency} (${load} each): hot wallet ${hot.toFixed(0)}/s, spread over 64 wallets ` +
        `${wide.toFixed(0)}/s, hot/spread ${(hot / wide).toFixed(2)}`,
    );
    console.log(
      `bench:wallets: hold p50 ${p50} ms, hot ${hot.toFixed(0)}/s, spread ${wide.toFixed(0)}/s, ratio ${(hot / wide).toFixed(2)}`,
    );
  } finally {
    await db.close();
    await server.close(true);
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
