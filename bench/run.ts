/**
 * `npm run bench [-- --quick]`: throughput, latency and Temporal cost of charges through the real stack, in this
 * process plus a fresh in-memory Temporal dev server (and, for the wallet scenarios, a durable PostgreSQL of its own).
 * See bench/README.md for what is measured and the targets.
 *
 * Env: BENCH_PAYMENTS (300; quick 80), BENCH_SERIAL_PAYMENTS (40; quick 20), BENCH_CONCURRENCY (16), BENCH_FAULT_RATE (0.1), BENCH_SEED (42),
 * BENCH_SCENARIOS (comma-separated ids, default all), BENCH_DEADLINE_S (400; quick 180), BENCH_LOG_LEVEL (silent),
 * BENCH_DEV_SERVER_ARGS (extra `temporal server start-dev` args; `--dynamic-config-value K=V` overrides the single-box
 * dynamic config), BENCH_STOCK_DEV_SERVER=1 (the dev server without the single-box dynamic config).
 * Exit 0: every scenario passed; 1: a scenario failed (a double charge, a missing charge, an unexpected answer, the
 * deadline); 2: the bench itself could not run.
 */
import { setMaxListeners } from 'node:events';
import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { growthMain } from './growth';
import { runMemoryBench } from './memory';
import type { MemoryReport } from './memory-worker';
import { latencyTable, peersTable, ratio, resourceTable, temporalTable } from './report';
import { type RunSettings, type ScenarioResult, type ScenarioSpec, runScenario } from './scenario';
import { type BenchInfra, startInfra } from './stack';
import { SPLIT_WALLET_PART } from './wallet-scenario';
import { targetLine, walletScenarioIds, walletSummaryLine, walletTargets } from './wallet-targets';

/** The whole-life scenario's refund window: long enough for the answer and the webhook, short enough to wait for. */
const LIFECYCLE_REFUND_WINDOW_MS = 2_000;

/** The wallets the spread scenario's payments go round (bench:wallets spreads its holds over as many). */
const SPREAD_WALLETS = 64;

const SCENARIOS: readonly ScenarioSpec[] = [
  {
    id: 'api-bulkhead',
    description:
      '(a) today: HTTP API -> PaymentsClient update-with-start; activities on the per-provider task queue (bulkhead)',
    path: 'api',
  },
  {
    id: 'bare-workflow',
    description:
      'peer: HTTP -> client.workflow.execute of a one-activity workflow (the samples way): no update, webhooks, search attributes',
    path: 'bare-workflow',
  },
  {
    id: 'no-engine',
    description: 'peer: HTTP -> the same provider call with a key straight from the handler (the floor)',
    path: 'no-engine',
  },
  {
    id: 'api-bulkhead-drop',
    description:
      '(a) with commit_then_drop on a share of provider creates: the unknown path, retried with the same key',
    path: 'api',
    faultRate: 0.1,
  },
  {
    id: 'direct-start',
    description: '(b) baseline: Temporal client start + submit update (same workflow, id, input), no HTTP',
    path: 'direct',
    requestEagerStart: false,
  },
  {
    id: 'direct-start-eager',
    description: '(b) the same with requestEagerStart (client over the workers NativeConnection)',
    path: 'direct',
    requestEagerStart: true,
    probeEagerUpdateWithStart: true,
  },
  {
    id: 'api-bulkhead-c1',
    description: '(a) one payment at a time: the unloaded latency of the API path',
    path: 'api',
    serial: true,
  },
  {
    id: 'bare-workflow-c1',
    description: 'peer: bare workflow, one payment at a time',
    path: 'bare-workflow',
    serial: true,
  },
  {
    id: 'no-engine-c1',
    description: 'peer: no engine, one payment at a time',
    path: 'no-engine',
    serial: true,
  },
  {
    id: 'direct-start-c1',
    description: '(b) baseline, one payment at a time',
    path: 'direct',
    requestEagerStart: false,
    serial: true,
  },
  {
    id: 'direct-start-eager-c1',
    description: '(b) requestEagerStart, one payment at a time',
    path: 'direct',
    requestEagerStart: true,
    serial: true,
  },
  {
    id: 'api-lifecycle',
    description: `(a) whole life: a ${LIFECYCLE_REFUND_WINDOW_MS / 1000} s refund window, waits until the payments closed`,
    path: 'api',
    serial: true,
    refundWindowMs: LIFECYCLE_REFUND_WINDOW_MS,
  },
  // Issue 23: payments with a wallet part through the real stack (HTTP API -> PaymentsClient -> workflow -> wallet
  // activities on the run's PostgreSQL). Each pair that is compared runs back to back.
  {
    id: walletScenarioIds.walletOnly,
    description: 'wallet only, one payment at a time: the wallet covers all of it, no provider call',
    path: 'api',
    serial: true,
    wallet: { covers: 'all', wallets: 1 },
  },
  {
    id: walletScenarioIds.card,
    description: "card only, one payment at a time, on a stack with wallets: the split payment's reference",
    path: 'api',
    serial: true,
    wallet: { covers: 'none', wallets: 0 },
  },
  {
    id: walletScenarioIds.split,
    description: `split, one payment at a time: ${SPLIT_WALLET_PART} from the wallet, the card the rest`,
    path: 'api',
    serial: true,
    wallet: { covers: 'part', wallets: 1 },
  },
  {
    id: walletScenarioIds.hot,
    description: 'wallet-only payments at full concurrency, all on one hot wallet',
    path: 'api',
    wallet: { covers: 'all', wallets: 1 },
  },
  {
    id: walletScenarioIds.spread,
    description: `wallet-only payments at full concurrency, spread over ${SPREAD_WALLETS} wallets`,
    path: 'api',
    wallet: { covers: 'all', wallets: SPREAD_WALLETS },
  },
];

interface Options {
  readonly quick: boolean;
  readonly settings: RunSettings;
  readonly faultRate: number;
  readonly scenarios: readonly ScenarioSpec[];
  readonly deadlineS: number;
}

function intFromEnv(name: string, fallback: number, min: number, max: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min || n > max) throw new Error(`${name} must be an integer in [${min}, ${max}]`);
  return n;
}

function parseOptions(argv: readonly string[]): Options {
  const unknown = argv.filter((a) => a !== '--quick' && a !== '--memory' && a !== '--growth');
  if (unknown.length > 0)
    throw new Error(`unknown argument(s): ${unknown.join(' ')} (only --quick, --memory, --growth)`);
  const quick = argv.includes('--quick');
  const payments = intFromEnv('BENCH_PAYMENTS', quick ? 80 : 300, 1, 100_000);
  const concurrency = intFromEnv('BENCH_CONCURRENCY', 16, 1, 1_000);
  const rawRate = process.env.BENCH_FAULT_RATE;
  const faultRate = rawRate === undefined || rawRate === '' ? 0.1 : Number(rawRate);
  if (!(faultRate >= 0 && faultRate <= 1)) throw new Error('BENCH_FAULT_RATE must be a number in [0, 1]');
  const wanted = (process.env.BENCH_SCENARIOS ?? '').split(',').filter(Boolean);
  const unknownIds = wanted.filter((id) => !SCENARIOS.some((s) => s.id === id));
  if (unknownIds.length > 0) {
    throw new Error(
      `unknown BENCH_SCENARIOS: ${unknownIds.join(', ')} (have ${SCENARIOS.map((s) => s.id).join(', ')})`,
    );
  }
  return {
    quick,
    faultRate,
    deadlineS: intFromEnv('BENCH_DEADLINE_S', quick ? 180 : 400, 10, 3_600),
    scenarios: SCENARIOS.filter((s) => wanted.length === 0 || wanted.includes(s.id)).map((s) =>
      s.faultRate === undefined ? s : { ...s, faultRate },
    ),
    settings: {
      payments,
      concurrency,
      serialPayments: intFromEnv('BENCH_SERIAL_PAYMENTS', quick ? 20 : 40, 1, 10_000),
      warmup: Math.min(payments, quick ? 8 : 20),
      historySample: quick ? 10 : 25,
      seed: intFromEnv('BENCH_SEED', 42, 0, 2 ** 31 - 1),
    },
  };
}

const log = (line: string) => process.stderr.write(`[bench] ${line}\n`);

/**
 * The run in one line (issue 11's acceptance line): whole-life actions and events (events at the answer in
 * parentheses), unloaded p50/p99 of the API path, its throughput over the bare-workflow peer's at the same
 * concurrency, CPU per payment (node + Temporal) of the loaded API path.
 */
export function summaryLine(results: readonly ScenarioResult[]): string {
  const by = (id: string) => results.find((r) => r.id === id);
  const f = (x: number | undefined, digits = 1) =>
    x === undefined || Number.isNaN(x) ? '-' : String(Math.round(x * 10 ** digits) / 10 ** digits);
  const base = by('api-bulkhead');
  const life = by('api-lifecycle') ?? base;
  const c1 = by('api-bulkhead-c1');
  const cpu = base && base.cpu.benchProcessMsPerPayment + (base.cpu.devServerMsPerPayment ?? 0);
  return (
    `bench: actions/payment ${f(life?.history.actionsPerPayment)}, events/payment ${f(life?.history.eventsPerPayment)} ` +
    `(${f(base?.history.eventsPerPayment)} at answer), p50 c1 ${f(c1?.latencyMs.p50)} ms, p99 c1 ` +
    `${f(c1?.latencyMs.p99)} ms, throughput vs bare workflow ` +
    `${f(ratio(base?.throughputPerS, by('bare-workflow')?.throughputPerS), 2)} x, cpu/payment ${f(cpu)} ms`
  );
}

/** One-line findings that compare the scenarios (when both sides of a comparison ran). */
function findings(results: readonly ScenarioResult[]): string[] {
  const by = (id: string) => results.find((r) => r.id === id);
  const out: string[] = [];
  const base = by('api-bulkhead');
  const drop = by('api-bulkhead-drop');
  const direct = by('direct-start');
  const eager = by('direct-start-eager');
  const f = (x: number | undefined) => (x === undefined || Number.isNaN(x) ? '-' : x.toFixed(1));
  if (base && drop) {
    out.push(
      `unknown path (${drop.simulator.faultHits} dropped creates): settled p50/p95 of the faulted payments ` +
        `${f(drop.settledFaultedMs?.p50)}/${f(drop.settledFaultedMs?.p95)} ms vs clean ` +
        `${f(drop.settledCleanMs?.p50)}/${f(drop.settledCleanMs?.p95)} ms; ` +
        `~actions per faulted payment ${f(drop.historyFaulted?.actionsPerPayment)} vs ${f(base.history.actionsPerPayment)}`,
    );
  }
  const hooks = by('api-lifecycle')?.merchantWebhooks;
  if (hooks) {
    const d = hooks;
    out.push(
      `merchant webhooks on: ${d.delivered} of ${d.events} events delivered; the delivery workflow's ~actions ` +
        `${f(d.actionsPerPayment)} and events ${f(d.historyEventsPerPayment)} per payment on top of the payment's own`,
    );
  }
  const directC1 = by('direct-start-c1');
  const eagerC1 = by('direct-start-eager-c1');
  if (directC1 && eagerC1) {
    out.push(
      `requestEagerStart, one at a time: p50 ${f(directC1.latencyMs.p50)} -> ${f(eagerC1.latencyMs.p50)} ms, ` +
        `p95 ${f(directC1.latencyMs.p95)} -> ${f(eagerC1.latencyMs.p95)} ms; workflow tasks per payment ` +
        `${f(directC1.history.workflowTasksPerPayment)} -> ${f(eagerC1.history.workflowTasksPerPayment)} ` +
        '(start and update arrive separately)',
    );
  }
  const apiC1 = by('api-bulkhead-c1');
  if (apiC1) {
    out.push(
      `API path one at a time: p50 ${f(apiC1.latencyMs.p50)} ms, p95 ${f(apiC1.latencyMs.p95)} ms ` +
        `(${f(apiC1.throughputPerS)} pay/s); at concurrency ${base?.concurrency ?? '-'}: p50 ${f(base?.latencyMs.p50)} ms ` +
        `at ${f(base?.throughputPerS)} pay/s`,
    );
  }
  if (base) {
    const cpu = base.cpu.benchProcessMsPerPayment + (base.cpu.devServerMsPerPayment ?? 0);
    out.push(
      `CPU per payment on the API path: ${f(cpu)} ms (node ${f(base.cpu.benchProcessMsPerPayment)}, Temporal ` +
        `${f(base.cpu.devServerMsPerPayment ?? undefined)}): ${os.cpus().length} cores cap this stack near ` +
        `${f((os.cpus().length * 1000) / cpu)} pay/s; beyond that, concurrency only adds queueing latency`,
    );
    out.push(
      `memory: this process grew ${f(base.memory.rssGrowthKiBPerPayment / 1024)} MiB RSS per payment driven ` +
        '(payments stay open for their refund window, cached by the workflow worker up to maxCachedWorkflows)',
    );
  }
  if (direct && eager) {
    out.push(
      `requestEagerStart at concurrency ${eager.concurrency}: p50 ${f(direct.latencyMs.p50)} -> ${f(eager.latencyMs.p50)} ms, ` +
        `p95 ${f(direct.latencyMs.p95)} -> ${f(eager.latencyMs.p95)} ms, ` +
        `pay/s ${f(direct.throughputPerS)} -> ${f(eager.throughputPerS)}; first workflow task schedule-to-start p50 ` +
        `${f(direct.history.firstWorkflowTaskScheduleToStartMsP50)} -> ${f(eager.history.firstWorkflowTaskScheduleToStartMsP50)} ms ` +
        `(${eager.eager?.eagerlyStarted ?? 0}/${eager.eager?.requested ?? 0} started eagerly)`,
    );
    const probe = eager.eagerUpdateWithStartProbe;
    if (probe) {
      out.push(
        probe.accepted
          ? `update-with-start accepted requestEagerStart (answered ${probe.status ?? '?'} in ${f(probe.ms)} ms)`
          : `update-with-start (PaymentsClient's call) rejects requestEagerStart: ${probe.error ?? '?'}`,
      );
    }
  }
  if (base || apiC1) {
    out.push(
      `activity on the bulkhead queue: schedule-to-start p50 ${f(apiC1?.history.activityScheduleToStartMsP50)} ms ` +
        `one at a time, ${f(base?.history.activityScheduleToStartMsP50)} ms at concurrency ${base?.concurrency ?? '-'} ` +
        `(what eager activity dispatch could save per payment; it needs the activity on the workflow's own queue, ` +
        `i.e. no bulkhead); provider call p50 ${f(apiC1?.history.activityStartToCloseMsP50)} ms`,
    );
  }
  const bare = by('bare-workflow');
  const none = by('no-engine');
  if (base && (bare || none)) {
    const cpu = (r: ScenarioResult) => r.cpu.benchProcessMsPerPayment + (r.cpu.devServerMsPerPayment ?? 0);
    out.push(
      `peers at concurrency ${base.concurrency}: ours ${f(base.throughputPerS)} pay/s, bare workflow ` +
        `${f(bare?.throughputPerS)} (ours ${f(ratio(base.throughputPerS, bare?.throughputPerS))}x), no engine ` +
        `${f(none?.throughputPerS)} (ours ${f(ratio(base.throughputPerS, none?.throughputPerS))}x); CPU per payment ` +
        `ours ${f(cpu(base))} ms, bare ${f(bare && cpu(bare))}, no engine ${f(none && cpu(none))}`,
    );
    if (bare) {
      // The stack is CPU-bound at C=16: CPU per payment predicts the quiet-machine throughput ratio even when
      // neighbours make the measured one noisy (they slow each scenario by a different share).
      const cores = os.cpus().length;
      out.push(
        `CPU-bound capacity on ${cores} cores from CPU per payment: ours ${f((cores * 1000) / cpu(base))} pay/s, ` +
          `bare workflow ${f((cores * 1000) / cpu(bare))}: ours ${f(ratio(cpu(bare), cpu(base)))}x (the throughput ` +
          `ratio a quiet machine shows; measured here ${f(ratio(base.throughputPerS, bare.throughputPerS))}x)`,
      );
    }
  }
  const bareC1 = by('bare-workflow-c1');
  const noneC1 = by('no-engine-c1');
  if (apiC1 && (bareC1 || noneC1)) {
    out.push(
      `peers one at a time, p50/p99 ms: ours ${f(apiC1.latencyMs.p50)}/${f(apiC1.latencyMs.p99)}, bare workflow ` +
        `${f(bareC1?.latencyMs.p50)}/${f(bareC1?.latencyMs.p99)}, no engine ${f(noneC1?.latencyMs.p50)}/` +
        `${f(noneC1?.latencyMs.p99)}: durability costs ${f(noneC1 && apiC1.latencyMs.p50 - noneC1.latencyMs.p50)} ms ` +
        `at p50 on our path, ${f(noneC1 && bareC1 && bareC1.latencyMs.p50 - noneC1.latencyMs.p50)} ms the samples' way`,
    );
  }
  const life = by('api-lifecycle');
  if (life) {
    out.push(
      `whole life (refund window ${f(LIFECYCLE_REFUND_WINDOW_MS / 1000)} s, closed before sampling): ~actions ` +
        `${f(life.history.actionsPerPayment)}, events ${f(life.history.eventsPerPayment)}, workflow tasks ` +
        `${f(life.history.workflowTasksPerPayment)}, signals ${f(life.history.signalsPerPayment)} (a webhook that ` +
        `arrives before the workflow applied the provider's answer is signalled); at answer (open, api-bulkhead) ` +
        `events ${f(base?.history.eventsPerPayment)}`,
    );
  }
  const noisy = results.filter((r) => (r.cpu.othersBusyPct ?? 0) >= 15);
  if (noisy.length > 0) {
    out.push(
      `WARNING: other processes used ${noisy.map((r) => `${(r.cpu.othersBusyPct ?? 0).toFixed(0)}% (${r.id})`).join(', ')} ` +
        "of the machine's CPU: latency and throughput of those scenarios are inflated (CPU ms per payment is not)",
    );
  }
  return out;
}

/** `--memory`: the worker alone, N open payments, its memory per payment (bench/memory.ts). */
async function memoryMain(quick: boolean): Promise<number> {
  const deadlineS = intFromEnv('BENCH_DEADLINE_S', quick ? 180 : 400, 10, 3_600);
  const deadline = new AbortController();
  const timer = setTimeout(() => deadline.abort(), deadlineS * 1000);
  setTimeout(() => process.exit(2), (deadlineS + 30) * 1000).unref();
  try {
    const r = await runMemoryBench(quick, log, deadline.signal);
    const out = process.stdout;
    const row = (label: string, m: MemoryReport) =>
      `${label.padEnd(8)} rss ${m.rssMiB.toFixed(1).padStart(8)} MiB  heap ${m.heapUsedMiB.toFixed(1).padStart(7)} MiB` +
      `  external ${m.externalMiB.toFixed(1).padStart(6)} MiB\n`;
    out.write(`\nWorker alone, after a full GC (${r.warmup} warm-up payments before "before"):\n`);
    out.write(row('before', r.before));
    out.write(row('after', r.after));
    if (r.failures.length > 0) out.write(`\nFAILED:\n${r.failures.map((f) => `  - ${f}`).join('\n')}\n`);
    out.write(
      `bench memory: ${r.opened} open payments, worker rss ${r.rssKiBPerPayment} KiB/payment, heap ` +
        `${r.heapKiBPerPayment} KiB/payment, bundle ${r.bundleMiB} MiB, maxCachedWorkflows ${r.maxCachedWorkflows}, ` +
        `reuseV8Context ${r.reuseV8Context}\n`,
    );
    return r.failures.length > 0 ? 1 : 0;
  } finally {
    clearTimeout(timer);
  }
}

async function main(): Promise<number> {
  // Against a running `npm run cluster`: cost per open payment from 1,000 to 50,000 (bench/growth.ts).
  if (process.argv.includes('--growth')) return growthMain();
  if (process.argv.includes('--memory')) {
    parseOptions(process.argv.slice(2));
    return memoryMain(process.argv.includes('--quick'));
  }
  const options = parseOptions(process.argv.slice(2));
  const { settings } = options;
  const deadline = new AbortController();
  // Every in-flight request and repeat listens to the deadline.
  setMaxListeners(settings.concurrency * 4 + 32, deadline.signal);
  const deadlineTimer = setTimeout(() => {
    log(`deadline of ${options.deadlineS} s reached: stopping`);
    deadline.abort();
  }, options.deadlineS * 1000);
  const onSignal = () => {
    log('interrupted: stopping');
    deadline.abort();
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  // Last resort: whatever hangs, the process ends 30 s after the deadline.
  setTimeout(
    () => {
      log('shutdown did not finish within 30 s of the deadline: exiting');
      process.exit(2);
    },
    (options.deadlineS + 30) * 1000,
  ).unref();

  const startedAt = new Date();
  const t0 = performance.now();
  log(
    `${options.quick ? 'quick: ' : ''}${settings.payments} payments x ${options.scenarios.length} scenarios, ` +
      `concurrency ${settings.concurrency}, warm-up ${settings.warmup}, deadline ${options.deadlineS} s`,
  );
  let infra: BenchInfra | undefined;
  const results: ScenarioResult[] = [];
  try {
    infra = await startInfra(log, { wallets: options.scenarios.some((s) => s.wallet !== undefined) });
    if (infra.devServerArgs.length > 0) log(`dev server args: ${infra.devServerArgs.join(' ')}`);
    log(`stack ready in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    for (const spec of options.scenarios) {
      if (deadline.signal.aborted) break;
      log(`scenario ${spec.id}: ${spec.description}`);
      const result = await runScenario(infra, spec, settings, deadline.signal, log);
      results.push(result);
      log(
        `  ${spec.id}: ${result.throughputPerS} pay/s, p95 ${result.latencyMs.p95} ms, ` +
          `effects ${result.simulator.createEffects}/${result.simulator.expectedEffects}` +
          (result.failures.length > 0 ? `, FAILED: ${result.failures.join('; ')}` : ''),
      );
    }
  } finally {
    clearTimeout(deadlineTimer);
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    if (infra) {
      const closing = performance.now();
      await infra.close();
      log(`stack stopped in ${((performance.now() - closing) / 1000).toFixed(1)} s`);
    }
  }

  const failures = results.flatMap((r) => r.failures.map((f) => `${r.id}: ${f}`));
  if (results.length < options.scenarios.length) failures.push('not every scenario ran (deadline or interrupt)');
  const lines = findings(results);
  const targets = walletTargets(results);
  const walletsRan = results.some((r) => r.wallet !== undefined);
  const totalS = (performance.now() - t0) / 1000;

  const out = process.stdout;
  out.write(
    '\nLatency per payment (ms; first answer; "settled" includes same-key repeats after 202; "others busy": CPU share' +
      ' of the machine used by other processes meanwhile)\n',
  );
  out.write(`${latencyTable(results)}\n\n`);
  out.write(
    'Ours beside the peers (same run; ~actions and events of ours are whole life where api-lifecycle ran; cpu ms per' +
      ' payment; ratios ours / peer)\n',
  );
  out.write(`${peersTable(results)}\n\n`);
  out.write('Temporal cost per payment (sampled histories; latencies are p50 ms from history timestamps)\n');
  out.write(`${temporalTable(results)}\n\n`);
  out.write('Resources (CPU ms per payment while measuring; memory MiB)\n');
  out.write(`${resourceTable(results)}\n\n`);
  for (const line of lines) out.write(`- ${line}\n`);
  if (walletsRan) {
    out.write(`\nWallets (issue 23; ${infra?.wallets?.server ?? 'PostgreSQL'}, fsync on)\n`);
    for (const r of results) {
      if (r.wallet === undefined) continue;
      const h = r.wallet.holdMs;
      const d = r.wallet.workerDebitMs;
      const holds =
        (h.count === 0 ? 'no holds' : `the answer's hold or debit p50/p95 ${h.p50}/${h.p95} ms (${h.count})`) +
        (d.count === 0 ? '' : `; the workers' debits (read back after the answer) p50 ${d.p50} ms (${d.count})`);
      out.write(
        `- ${r.id}: ${r.throughputPerS} pay/s, p50 ${r.latencyMs.p50} ms; ${holds}; wallets checked over ` +
          `${r.wallet.checkedPayments} payments: ` +
          `${r.wallet.problems.length === 0 && r.wallet.settled ? 'balances = entries = parts' : 'PROBLEMS'}\n`,
      );
    }
    for (const t of targets) out.write(`  ${targetLine(t)}\n`);
  }

  const file = path.join(__dirname, 'results', `${startedAt.toISOString().replace(/[:.]/g, '-')}.json`);
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(
    file,
    `${JSON.stringify(
      {
        startedAt: startedAt.toISOString(),
        durationS: Math.round(totalS * 10) / 10,
        quick: options.quick,
        settings,
        faultRate: options.faultRate,
        machine: {
          cpus: os.cpus().length,
          totalMemGiB: Math.round(os.totalmem() / 2 ** 30),
          loadavg1m: os.loadavg()[0],
          node: process.version,
          platform: `${process.platform}-${process.arch}`,
        },
        temporalCli: infra?.temporalSource,
        devServerArgs: infra?.devServerArgs,
        scenarios: results,
        findings: lines,
        ...(walletsRan ? { walletTargets: targets, walletDatabase: infra?.wallets?.server } : {}),
        ok: failures.length === 0,
        failures,
      },
      null,
      2,
    )}\n`,
  );
  out.write(`\nresults: ${path.relative(process.cwd(), file)} (${totalS.toFixed(1)} s)\n`);
  if (failures.length > 0) {
    out.write(`\nFAILED:\n${failures.map((f) => `  - ${f}`).join('\n')}\n`);
  } else {
    out.write('OK: every payment charged exactly once, no unexpected answers\n');
  }
  if (walletsRan) out.write(`${walletSummaryLine(targets)}\n`);
  // Last line: the run in one line (exit code 0 only when the money checks held).
  out.write(`${summaryLine(results)}\n`);
  return failures.length > 0 ? 1 : 0;
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    console.error(err);
    process.exit(2);
  },
);
