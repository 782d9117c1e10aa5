/**
 * The wallet activities on the real stack: a worker killed between the hold's COMMIT and the activity's completion,
 * and PostgreSQL crashed and restarted under load. Operation ids make every retry read the operation back: nothing is
 * applied twice and nothing is lost.
 */
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker, bundleWorkflowCode } from '@temporalio/worker';
import pino from 'pino';
import { type PostgresServer, startPostgresServer } from '../../scripts/lib/postgres-server';
import { createWalletActivities } from '../../src/activities/wallets';
import { openDatabase } from '../../src/db';
import { WalletLedger } from '../../src/wallets';
import { openTestDatabase } from '../helpers/database';
import { eventually } from '../helpers/eventually';
import { connectDevServer } from '../helpers/servers';
import type { WalletPaymentArgs, walletPaymentWorkflow } from './fixtures/wallet-payment';
import type { WalletWorkerSpec } from './fixtures/wallet-worker';

let env: TestWorkflowEnvironment;
let bundlePath: string;
const logger = pino({ level: 'silent' });

beforeAll(async () => {
  env = await connectDevServer();
  const { code } = await bundleWorkflowCode({
    workflowsPath: require.resolve('./fixtures/wallet-payment'),
    logger: { log() {}, trace() {}, debug() {}, info() {}, warn() {}, error() {} },
  });
  bundlePath = path.join(mkdtempSync(path.join(os.tmpdir(), 'pw-wallet-bundle-')), 'bundle.js');
  writeFileSync(bundlePath, code);
}, 120_000);
afterAll(() => env?.teardown());

/** Entries of a wallet by kind, straight from the table. */
async function entryCounts(ledger: WalletLedger, merchantId: string, walletId: string) {
  const page = await ledger.entries(merchantId, walletId, { pageSize: 100 });
  const counts: Record<string, number> = {};
  for (const e of page?.entries ?? []) counts[e.kind] = (counts[e.kind] ?? 0) + 1;
  return counts;
}

it('holds once when the worker is SIGKILLed between the hold’s COMMIT and the activity’s completion', async () => {
  const db = await openTestDatabase();
  const outcomes: string[] = [];
  const ledger = new WalletLedger(db.pool, {
    onOperation: (kind, outcome) => void outcomes.push(`${kind}:${outcome}`),
  });
  const taskQueue = `wallet-crash-${randomUUID()}`;
  try {
    await ledger.credit('m1', 'w1', 'fund', { amount: { value: 1_000, currency: 'EUR' } });
    const spec: WalletWorkerSpec = {
      temporalAddress: env.address,
      taskQueue,
      databaseUrl: db.url,
      workflowBundlePath: bundlePath,
      killAfterHold: true,
    };
    const child = spawn(process.execPath, ['--import', 'tsx', require.resolve('./fixtures/wallet-worker')], {
      env: { ...process.env, PW_WALLET_WORKER: JSON.stringify(spec) },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const exited = new Promise<NodeJS.Signals | null>((resolve) =>
      child.once('exit', (_code, signal) => resolve(signal)),
    );
    await new Promise<void>((resolve, reject) => {
      createInterface({ input: child.stdout }).once('line', (l) => (l === 'ready' ? resolve() : reject(new Error(l))));
      child.once('exit', (code) => reject(new Error(`wallet worker exited ${code}`)));
    });

    const args: WalletPaymentArgs = {
      merchantId: 'm1',
      walletId: 'w1',
      paymentKey: 'pay-1',
      amount: 400,
      currency: 'EUR',
      attemptMs: 2_000,
    };
    const handle = await env.client.workflow.start<typeof walletPaymentWorkflow>('walletPaymentWorkflow', {
      workflowId: `wallet-crash-${randomUUID()}`,
      taskQueue,
      args: [args],
    });
    // The hold was committed and the worker died before completing the activity.
    expect(await exited).toBe('SIGKILL');
    expect(await entryCounts(ledger, 'm1', 'w1')).toEqual({ credit: 1, hold: 1 });

    // Another worker takes the retry once the dead attempt's bound passed: it reads the hold back instead of adding one.
    const worker = await Worker.create({
      connection: env.nativeConnection,
      taskQueue,
      workflowBundle: { codePath: bundlePath },
      activities: createWalletActivities({ ledger, logger }),
    });
    const result = await worker.runUntil(handle.result());

    expect(result).toBe('captured');
    expect(outcomes).toEqual(['credit:applied', 'read:read', 'hold:replayed', 'capture:applied']);
    expect(await entryCounts(ledger, 'm1', 'w1')).toEqual({ credit: 1, hold: 1, capture: 1 });
    expect(await ledger.get('m1', 'w1')).toMatchObject({ balance: 600, held: 0, available: 600 });
  } finally {
    await db.drop();
  }
}, 120_000);

it('applies every payment exactly once when PostgreSQL crashes and restarts under load', async () => {
  const server: PostgresServer = await startPostgresServer({
    dir: mkdtempSync(path.join(os.tmpdir(), 'pw-wallet-restart-')),
  });
  const database = await openDatabase({ url: await server.createDatabase('payments'), poolSize: 8 }, logger);
  const outcomes: string[] = [];
  const ledger = new WalletLedger(database.pool, { onOperation: (_k, outcome) => void outcomes.push(outcome) });
  const taskQueue = `wallet-restart-${randomUUID()}`;
  const wallets = ['wa', 'wb', 'wc'];
  const payments = 90;
  try {
    // 3 x 2,500 covers 75 payments of 100: 15 are refused for insufficient funds, whichever they are.
    for (const w of wallets) await ledger.credit('m1', w, `fund-${w}`, { amount: { value: 2_500, currency: 'EUR' } });
    const worker = await Worker.create({
      connection: env.nativeConnection,
      taskQueue,
      workflowBundle: { codePath: bundlePath },
      activities: createWalletActivities({ ledger, logger }),
      maxConcurrentActivityTaskExecutions: 16,
    });
    const results = await worker.runUntil(async () => {
      const handles = await Promise.all(
        Array.from({ length: payments }, (_, i) =>
          env.client.workflow.start<typeof walletPaymentWorkflow>('walletPaymentWorkflow', {
            workflowId: `wallet-restart-${randomUUID()}`,
            taskQueue,
            args: [
              {
                merchantId: 'm1',
                walletId: wallets[i % 3] as string,
                paymentKey: `p-${i}`,
                amount: 100,
                currency: 'EUR',
              },
            ],
          }),
        ),
      );
      // Crash the server while the payments run (some settled, most not), then start it again on its data.
      const settled = handles.map((h) => h.result());
      await eventually('20 applied outcomes', () => outcomes.filter((o) => o === 'applied').length >= 20, 60_000, 20);
      await server.kill();
      await new Promise((r) => setTimeout(r, 1_000));
      await server.start();
      return Promise.all(settled);
    });

    expect(results.filter((r) => r === 'captured')).toHaveLength(75);
    expect(results.filter((r) => r === 'insufficient_funds')).toHaveLength(15);
    // The crash hit operations in flight: they failed as not applied or unknown, and their retries settled them.
    expect(outcomes.filter((o) => o === 'DatabaseNotApplied' || o === 'DatabaseOutcomeUnknown').length).toBeGreaterThan(
      0,
    );
    const { rows } = await database.pool.query<{ kind: string; n: string; keys: string }>(
      `SELECT kind, COUNT(*) AS n, COUNT(DISTINCT payment_key) AS keys FROM wallet_entries
        WHERE kind IN ('hold', 'capture') GROUP BY kind ORDER BY kind`,
    );
    expect(rows).toEqual([
      { kind: 'capture', n: '75', keys: '75' },
      { kind: 'hold', n: '75', keys: '75' },
    ]);
    for (const w of wallets) expect(await ledger.get('m1', w)).toMatchObject({ balance: 0, held: 0 });
  } finally {
    await database.close();
    await server.close(true);
  }
}, 180_000);
