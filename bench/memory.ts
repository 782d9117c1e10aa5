/**
 * `npm run bench -- --memory [--quick]`: resident memory per open (cached) payment in the worker, measured with the
 * worker alone. This process runs the dev server, the simulator and the client; the worker (bench/memory-worker.ts:
 * `createWorkers`, nothing else) is a child process. After a warm-up, N manual-capture payments are opened (each waits
 * for its capture for 7 days, so it stays open and in the worker's cache) and the worker's RSS and heap after a full
 * GC are compared before and after: the growth over N is what one open payment costs the worker.
 *
 * Env: BENCH_MEMORY_PAYMENTS (1000; quick 300), BENCH_MEMORY_MAX_CACHED (the worker's maxCachedWorkflows; default the
 * SDK's), BENCH_MEMORY_REUSE_V8_CONTEXT (1/0; default the SDK's, 1), BENCH_DEV_SERVER_ARGS / BENCH_STOCK_DEV_SERVER.
 * Exit 0 when every payment answered `authorized` and the worker answered every measurement; 1 otherwise.
 */
import { type ChildProcess, fork } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { bundleWorkflowCode } from '@temporalio/worker';
import { startDevServer } from '../scripts/lib/dev-server';
import { PaymentsClient } from '../src/client';
import { startSimulator } from '../src/simulator/server';
import { forEachBounded, indices } from './bounded';
import type { MemoryReport, MemoryRequest } from './memory-worker';
import { benchTimings, devServerSettings, runClosers } from './stack';

export interface MemoryResult {
  readonly payments: number;
  readonly warmup: number;
  readonly opened: number;
  readonly before: MemoryReport;
  readonly after: MemoryReport;
  readonly rssKiBPerPayment: number;
  readonly heapKiBPerPayment: number;
  readonly bundleMiB: number;
  readonly maxCachedWorkflows: string;
  readonly reuseV8Context: string;
  readonly failures: readonly string[];
}

const intFromEnv = (name: string, fallback: number): number => {
  const raw = process.env[name];
  const n = raw === undefined || raw === '' ? fallback : Number(raw);
  if (!Number.isInteger(n) || n < 1 || n > 100_000) throw new Error(`${name} must be an integer in [1, 100000]`);
  return n;
};

/** Sends `request` and waits (bounded) for the worker's next message of `type`. */
function ask<T extends { type: string }>(
  child: ChildProcess,
  request: MemoryRequest | undefined,
  type: T['type'],
  timeoutMs: number,
): Promise<T> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.off('message', onMessage);
      reject(new Error(`the worker did not answer ${type} within ${timeoutMs} ms`));
    }, timeoutMs);
    const onMessage = (msg: { type: string; message?: string }) => {
      if (msg.type === 'error') {
        clearTimeout(timer);
        child.off('message', onMessage);
        reject(new Error(`worker: ${msg.message ?? '?'}`));
      } else if (msg.type === type) {
        clearTimeout(timer);
        child.off('message', onMessage);
        resolve(msg as unknown as T);
      }
    };
    child.on('message', onMessage);
    if (request) child.send(request);
  });
}

/** Runs the memory bench; `log` gets progress lines, `signal` aborts opening payments. */
export async function runMemoryBench(
  quick: boolean,
  log: (line: string) => void,
  signal: AbortSignal,
): Promise<MemoryResult> {
  const payments = intFromEnv('BENCH_MEMORY_PAYMENTS', quick ? 300 : 1_000);
  const warmup = 20;
  const concurrency = 8;
  const { dynamicConfig, extraArgs } = devServerSettings(process.env);
  const closers: (() => Promise<void>)[] = [];
  const dir = mkdtempSync(path.join(os.tmpdir(), 'bench-memory-'));
  closers.push(async () => rmSync(dir, { recursive: true, force: true }));
  try {
    const bundle = await bundleWorkflowCode({
      workflowsPath: require.resolve('../src/workflows'),
      logger: { log() {}, trace() {}, debug() {}, info() {}, warn() {}, error: (m: string) => log(m) },
    });
    const bundlePath = path.join(dir, 'workflow-bundle.js');
    writeFileSync(bundlePath, bundle.code);
    const env = await startDevServer({ dynamicConfig, extraArgs }, { log: (l) => log(`[temporal] ${l}`) });
    closers.unshift(() => env.teardown());
    const sim = await startSimulator({ port: 0 });
    closers.unshift(() => sim.close());
    const apiKey = `sk_bench_${randomUUID()}`;
    await sim.setMerchant(apiKey, { idempotency: true });
    const taskQueue = `bench-memory-${randomUUID().slice(0, 8)}`;
    const namespace = env.namespace ?? 'default';

    const child = fork(path.join(__dirname, 'memory-worker.ts'), [], {
      execArgv: ['--expose-gc', '--import', 'tsx'],
      env: {
        ...process.env,
        MEMORY_TEMPORAL_ADDRESS: env.address,
        MEMORY_NAMESPACE: namespace,
        MEMORY_TASK_QUEUE: taskQueue,
        MEMORY_SIMULATOR_URL: sim.url,
        MEMORY_PROVIDER_API_KEY: apiKey,
        MEMORY_BUNDLE_PATH: bundlePath,
        ...(process.env.BENCH_MEMORY_MAX_CACHED ? { MEMORY_MAX_CACHED: process.env.BENCH_MEMORY_MAX_CACHED } : {}),
        ...(process.env.BENCH_MEMORY_REUSE_V8_CONTEXT
          ? { MEMORY_REUSE_V8_CONTEXT: process.env.BENCH_MEMORY_REUSE_V8_CONTEXT }
          : {}),
      },
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    closers.unshift(async () => {
      if (child.exitCode === null) {
        child.send({ type: 'stop' } satisfies MemoryRequest);
        const killer = setTimeout(() => child.kill('SIGKILL'), 15_000);
        await exited;
        clearTimeout(killer);
      }
    });
    await ask(child, undefined, 'ready', 60_000);
    log(`worker ready (pid ${child.pid}); bundle ${(bundle.code.length / 2 ** 20).toFixed(2)} MiB`);

    const merchantId = `bench_${randomUUID().slice(0, 8)}`;
    const client = new PaymentsClient(env.client, {
      taskQueue,
      timings: benchTimings,
    });
    const failures: string[] = [];
    let opened = 0;
    const open = (count: number) =>
      forEachBounded(
        indices(0, count),
        concurrency,
        async (i) => {
          try {
            const { view } = await client.charge(merchantId, `mem_${randomUUID()}`, {
              orderId: `order_mem_${i}_${randomUUID().slice(0, 8)}`,
              amount: { value: 1_000 + (i % 100), currency: 'EUR' },
              paymentMethod: 'pm_card_visa',
              capture: 'manual',
            });
            if (view.status === 'authorized') opened += 1;
            else failures.push(`payment answered ${view.status}, not authorized`);
          } catch (err) {
            failures.push(`charge failed: ${err instanceof Error ? err.message : String(err)}`);
          }
        },
        { signal },
      );
    await open(warmup);
    const before = await ask<MemoryReport>(child, { type: 'measure' }, 'memory', 30_000);
    log(`after ${warmup} warm-up payments: worker RSS ${before.rssMiB.toFixed(1)} MiB; opening ${payments} more...`);
    opened = 0;
    await open(payments);
    const after = await ask<MemoryReport>(child, { type: 'measure' }, 'memory', 30_000);
    if (opened !== payments) failures.push(`only ${opened} of ${payments} payments opened`);
    const perPayment = (a: number, b: number) => Math.round(((b - a) * 1024 * 10) / Math.max(1, opened)) / 10;
    return {
      payments,
      warmup,
      opened,
      before,
      after,
      rssKiBPerPayment: perPayment(before.rssMiB, after.rssMiB),
      heapKiBPerPayment: perPayment(before.heapUsedMiB, after.heapUsedMiB),
      bundleMiB: Math.round((bundle.code.length / 2 ** 20) * 100) / 100,
      maxCachedWorkflows: process.env.BENCH_MEMORY_MAX_CACHED ?? 'SDK default',
      reuseV8Context: process.env.BENCH_MEMORY_REUSE_V8_CONTEXT ?? 'SDK default (1)',
      failures: failures.slice(0, 10),
    };
  } finally {
    await runClosers(closers);
  }
}
