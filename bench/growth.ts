/**
 * `npm run bench -- --growth`: how the product's cost grows with the work it holds open (issue 21 §3). Against a
 * running `npm run cluster` (its stack file, as the soak reads it), it opens manual-capture payments that stay open
 * (each waits for its capture) up to each step of GROWTH_STEPS (default 1000,10000,50000) open in the cluster (what it
 * already holds counts), and at each step measures:
 * the latency p50/p99 of a new payment sent one at a time (GROWTH_SAMPLE, default 200), the CPU time of the product's
 * processes per payment opened during the step (Temporal, PostgreSQL, workers, APIs, Redis; the simulator's apart), the
 * PostgreSQL bytes per open payment (Temporal's two databases and the payments database) and the workers' resident
 * memory. It prints one line per step and whether each measure stayed within +-20 % from the first step to the last,
 * and writes bench/results/growth-<time>.json.
 *
 * Env: GROWTH_STACK_FILE (default the cluster's .temporal/cluster/stack.json), GROWTH_STEPS, GROWTH_SAMPLE,
 * GROWTH_CONCURRENCY (payments in flight while filling; default 16). Exit 0 when every payment answered and every
 * measure could be read (the ±20 % verdict is reported, not enforced: a bench measures, CI does not time it).
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { Client as PgClient } from 'pg';
import { DEFAULT_CACHE_DIR } from '../scripts/lib/temporal-binaries';
import { loadConfig } from '../src/config';
import { groupCpuMs, rssKiB } from './resources';
import { forEachBounded, indices } from './bounded';
import { percentile } from './stats';

interface StackInfo {
  readonly kind: string;
  readonly apiUrls: readonly string[];
  readonly postgres?: string;
  readonly services: Record<string, { readonly pid?: number; readonly state: string }>;
}

/** One step's measures. */
export interface GrowthStep {
  /** The cluster's open payments (running charge workflows in visibility), this run's and those it already held. */
  readonly open: number;
  readonly latencyP50Ms: number;
  readonly latencyP99Ms: number;
  /**
   * CPU time of the product's processes (Temporal, PostgreSQL, workers, APIs, Redis) per payment opened in this step;
   * the simulator's apart: it stands in for the provider, and its cost is not the product's.
   */
  readonly cpuMsPerPayment: number;
  /** The simulator's CPU time per payment opened in this step. */
  readonly simulatorCpuMsPerPayment: number;
  /** PostgreSQL bytes (all three databases) per open payment: fixed overhead included. */
  readonly pgBytesPerOpen: number;
  /**
   * PostgreSQL bytes added per open payment since the step before (the first step: since the run started, so the
   * empty databases' size, or a filled cluster's, is left out).
   */
  readonly pgMarginalBytesPerOpen: number;
  readonly pgBytes: { readonly temporal: number; readonly visibility: number; readonly payments: number };
  /** Resident memory of the workers, summed, MiB. */
  readonly workersRssMiB: number;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

const intList = (raw: string | undefined, fallback: number[]): number[] =>
  raw === undefined || raw === ''
    ? fallback
    : raw.split(',').map((s) => {
        const n = Number(s.trim());
        if (!Number.isInteger(n) || n < 1) throw new Error(`not a positive integer: ${s}`);
        return n;
      });

/** Within ±`pct` % of the first value at the last step. */
export function flat(first: number, last: number, pct = 20): boolean {
  if (first === 0) return last === 0;
  return Math.abs(last - first) / first <= pct / 100;
}

/** One line per step, then the verdict per measure. */
export function growthReport(steps: readonly GrowthStep[]): string[] {
  const lines = steps.map(
    (s) =>
      `growth: ${s.open} open: new payment p50 ${s.latencyP50Ms.toFixed(0)} ms, p99 ${s.latencyP99Ms.toFixed(0)} ms; ` +
      `CPU ${s.cpuMsPerPayment.toFixed(1)} ms per payment (the simulator ${s.simulatorCpuMsPerPayment.toFixed(1)} more); PostgreSQL ${(s.pgBytesPerOpen / 1024).toFixed(1)} KiB ` +
      `per open payment, ${(s.pgMarginalBytesPerOpen / 1024).toFixed(1)} KiB per payment added (temporal ${mib(s.pgBytes.temporal)}, visibility ${mib(s.pgBytes.visibility)}, payments ` +
      `${mib(s.pgBytes.payments)}); workers ${s.workersRssMiB.toFixed(0)} MiB`,
  );
  const first = steps[0];
  const last = steps[steps.length - 1];
  if (first && last && steps.length > 1) {
    const measures: [string, (s: GrowthStep) => number][] = [
      ['latency p50', (s) => s.latencyP50Ms],
      ['latency p99', (s) => s.latencyP99Ms],
      ['CPU per payment', (s) => s.cpuMsPerPayment],
      ['PostgreSQL bytes per payment added', (s) => s.pgMarginalBytesPerOpen],
      ['worker memory', (s) => s.workersRssMiB],
    ];
    lines.push(
      `growth ${first.open} -> ${last.open} open (within +-20 %?): ` +
        measures
          .map(([name, f]) => {
            const change = f(first) === 0 ? 0 : ((f(last) - f(first)) / f(first)) * 100;
            return `${name} ${change >= 0 ? '+' : ''}${change.toFixed(0)} % ${flat(f(first), f(last)) ? 'yes' : 'NO'}`;
          })
          .join(', '),
    );
  }
  return lines;
}

const mib = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MiB`;

export async function growthMain(): Promise<number> {
  const stackFile = process.env.GROWTH_STACK_FILE ?? path.join(DEFAULT_CACHE_DIR, 'cluster', 'stack.json');
  const stack = JSON.parse(readFileSync(stackFile, 'utf8')) as StackInfo;
  const steps = intList(process.env.GROWTH_STEPS, [1_000, 10_000, 50_000]);
  const sample = intList(process.env.GROWTH_SAMPLE, [200])[0] as number;
  const concurrency = intList(process.env.GROWTH_CONCURRENCY, [16])[0] as number;
  const [merchant] = loadConfig().API_TOKENS;
  if (!merchant) throw new Error('no API token configured');
  if (!stack.postgres)
    throw new Error(`${stackFile} names no PostgreSQL: the growth bench runs against npm run cluster`);
  const [pgHost, pgPort] = stack.postgres.split(':');
  const groupsOf = (which: (name: string) => boolean) =>
    new Set(
      Object.entries(stack.services)
        .filter(([name]) => which(name))
        .map(([, s]) => s.pid)
        .filter((p): p is number => p !== undefined),
    );
  const groups = groupsOf((name) => name !== 'simulator');
  const simulatorGroups = groupsOf((name) => name === 'simulator');
  const workers = [...groupsOf((name) => name.startsWith('worker'))];
  const runId = Date.now().toString(36);
  let opened = 0;
  let apiTurn = 0;
  const failures: string[] = [];

  /** One charge, repeated with its key on a 503 or a dropped connection (bounded); its latency when it answered. */
  const charge = async (i: number): Promise<number | undefined> => {
    const key = `growth-${runId}-${i}`;
    const deadline = Date.now() + 120_000;
    for (;;) {
      const base = stack.apiUrls[apiTurn++ % stack.apiUrls.length] as string;
      const started = performance.now();
      try {
        const res = await fetch(`${base}/v1/payments`, {
          method: 'POST',
          headers: {
            authorization: `Bearer ${merchant.token}`,
            'idempotency-key': key,
            'content-type': 'application/json',
          },
          body: JSON.stringify({
            orderId: `order-${key}`,
            amount: { value: 1_000, currency: 'EUR' },
            paymentMethod: 'pm_card_visa',
            capture: 'manual',
          }),
          signal: AbortSignal.timeout(30_000),
        });
        await res.text();
        if (res.status === 200 || res.status === 201 || res.status === 202) return performance.now() - started;
        if (res.status !== 503 || Date.now() > deadline) {
          failures.push(`payment ${i}: ${res.status}`);
          return undefined;
        }
      } catch (err) {
        if (Date.now() > deadline) {
          failures.push(`payment ${i}: ${err instanceof Error ? err.message : String(err)}`);
          return undefined;
        }
      }
      await sleep(1_000);
    }
  };

  // One connection, to Temporal's visibility database: the cluster's open payments there, this run's and any it already
  // held (a run against a filled cluster measures there), and every database's size (pg_database_size reads any).
  const visibility = new PgClient({
    host: pgHost,
    port: Number(pgPort),
    user: 'postgres',
    database: 'temporal_visibility',
  });
  await visibility.connect();
  const dbBytes = async (name: string): Promise<number> => {
    const r = await visibility.query<{ size: string }>('SELECT pg_database_size($1)::text AS size', [name]);
    return Number(r.rows[0]?.size ?? 0);
  };
  const openPayments = async (): Promise<number> => {
    const r = await visibility.query<{ n: string }>(
      `SELECT count(*)::text AS n FROM executions_visibility WHERE status = 1 AND workflow_type_name = 'chargeWorkflow'`,
    );
    return Number(r.rows[0]?.n ?? 0);
  };
  const allBytes = async () => ({
    temporal: await dbBytes('temporal'),
    visibility: await dbBytes('temporal_visibility'),
    payments: await dbBytes('payments'),
  });
  const sum = (b: GrowthStep['pgBytes']) => b.temporal + b.visibility + b.payments;
  // Before the first step: what is added is measured from here (the empty databases' size, or a filled cluster's).
  let openBefore = await openPayments();
  let bytesBefore = sum(await allBytes());
  const results: GrowthStep[] = [];
  try {
    for (const target of steps) {
      const cpuBefore = groupCpuMs(groups);
      const simulatorCpuBefore = groupCpuMs(simulatorGroups);
      const openedBefore = opened;
      // Fill up to the step, counting what the cluster already holds open (a run against a filled cluster adds only
      // what is missing), less the sample, which opens payments too; `concurrency` in flight.
      const fillTo = opened + Math.max(0, target - (await openPayments()) - sample);
      await forEachBounded(indices(opened, fillTo), concurrency, async (i) => {
        await charge(i);
      });
      opened = fillTo;
      // The sample, always taken: one at a time, as a single caller meets the system holding `target` open payments.
      const latencies: number[] = [];
      for (let s = 0; s < sample; s++) {
        const ms = await charge(opened++);
        if (ms !== undefined) latencies.push(ms);
      }
      const cpuMs = groupCpuMs(groups) - cpuBefore;
      const simulatorCpuMs = groupCpuMs(simulatorGroups) - simulatorCpuBefore;
      latencies.sort((a, b) => a - b);
      const pgBytes = await allBytes();
      const total = sum(pgBytes);
      const open = await openPayments();
      const step: GrowthStep = {
        open,
        latencyP50Ms: percentile(latencies, 50),
        latencyP99Ms: percentile(latencies, 99),
        cpuMsPerPayment: cpuMs / Math.max(1, opened - openedBefore),
        simulatorCpuMsPerPayment: simulatorCpuMs / Math.max(1, opened - openedBefore),
        pgBytesPerOpen: total / Math.max(1, open),
        pgMarginalBytesPerOpen: (total - bytesBefore) / Math.max(1, open - openBefore),
        pgBytes,
        workersRssMiB: workers.reduce((sum, pid) => sum + rssKiB(pid), 0) / 1024,
      };
      results.push(step);
      [openBefore, bytesBefore] = [open, total];
      for (const line of growthReport([step])) console.log(line);
    }
  } finally {
    await visibility.end();
  }
  for (const line of growthReport(results).slice(results.length)) console.log(line);
  const last = results[results.length - 1];
  if (last) {
    // Per payment added (the fixed size of empty databases left out), as a large deployment grows.
    const perOpen = last.pgMarginalBytesPerOpen;
    console.log(
      `growth: projected for 10,000,000 open payments: PostgreSQL ${((perOpen * 10_000_000) / 1024 ** 3).toFixed(0)} GiB ` +
        `(at ${(perOpen / 1024).toFixed(1)} KiB per payment added)`,
    );
  }
  const dir = path.join(__dirname, 'results');
  mkdirSync(dir, { recursive: true });
  const file = path.join(dir, `growth-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
  writeFileSync(file, JSON.stringify({ steps: results, sample, concurrency, failures }, null, 1) + '\n');
  console.log(
    `growth: results in ${path.relative(process.cwd(), file)}; ${failures.length} payments without an answer`,
  );
  for (const f of failures.slice(0, 10)) console.log(`  ${f}`);
  return failures.length === 0 && results.length === steps.length ? 0 : 1;
}
