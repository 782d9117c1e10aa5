/** Plain-text tables of the benchmark results. */
import type { ScenarioResult } from './scenario';

/** Right-aligns numbers, left-aligns the first column. */
export function table(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]) =>
    cells.map((c, i) => (i === 0 ? c.padEnd(widths[i] ?? 0) : c.padStart(widths[i] ?? 0))).join('  ');
  return [line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.map(line)].join('\n');
}

const num = (x: number | undefined | null, digits = 0): string =>
  x === undefined || x === null || Number.isNaN(x) ? '-' : x.toFixed(digits);

/** Throughput, latency, errors and the money check, one row per scenario. */
export function latencyTable(results: readonly ScenarioResult[]): string {
  return table(
    [
      'scenario',
      'N',
      'C',
      'pay/s',
      'p50',
      'p95',
      'p99',
      'max',
      'settled p95',
      'non-2xx',
      '202',
      'errors',
      'effects',
      'others busy %',
    ],
    results.map((r) => [
      r.id,
      String(r.payments),
      String(r.concurrency),
      num(r.throughputPerS, 1),
      num(r.latencyMs.p50, 1),
      num(r.latencyMs.p95, 1),
      num(r.latencyMs.p99, 1),
      num(r.latencyMs.max, 1),
      num(r.settledMs.p95, 1),
      String(r.answers.non2xx),
      String(r.answers.accepted202),
      String(r.errors),
      `${r.simulator.createEffects}/${r.simulator.expectedEffects}`,
      num(r.cpu.othersBusyPct, 0),
    ]),
  );
}

/** pay/s of `a` over `b` ('-' when either is missing). */
export const ratio = (a: number | undefined, b: number | undefined): number | undefined =>
  a === undefined || b === undefined || !(b > 0) ? undefined : Math.round((a / b) * 100) / 100;

const cpuTotal = (r: ScenarioResult): number => r.cpu.benchProcessMsPerPayment + (r.cpu.devServerMsPerPayment ?? 0);

/**
 * Ours beside the peers of the same run, loaded and one at a time: throughput, latency, Temporal cost and CPU, and
 * the ratios (ours / peer). Temporal cost of ours is the whole-life one where `api-lifecycle` ran.
 */
export function peersTable(results: readonly ScenarioResult[]): string {
  const by = (id: string) => results.find((r) => r.id === id);
  const lifecycle = by('api-lifecycle');
  const rows: string[][] = [];
  for (const suffix of ['', '-c1']) {
    const ours = by(`api-bulkhead${suffix}`);
    const bare = by(`bare-workflow${suffix}`);
    const none = by(`no-engine${suffix}`);
    for (const r of [ours, bare, none]) {
      if (!r) continue;
      const isOurs = r === ours;
      const h = isOurs && lifecycle ? lifecycle.history : r.history;
      rows.push([
        r.id,
        String(r.concurrency),
        num(r.throughputPerS, 1),
        num(r.latencyMs.p50, 1),
        num(r.latencyMs.p95, 1),
        num(r.latencyMs.p99, 1),
        num(h.actionsPerPayment, 1),
        num(h.eventsPerPayment, 1),
        isOurs && lifecycle ? num(r.history.eventsPerPayment, 1) : num(h.eventsPerPayment, 1),
        num(r.cpu.benchProcessMsPerPayment, 1),
        num(r.cpu.devServerMsPerPayment, 1),
        num(cpuTotal(r), 1),
        num(isOurs ? undefined : ratio(ours?.throughputPerS, r.throughputPerS), 2),
        num(isOurs ? undefined : ratio(ours?.latencyMs.p50, r.latencyMs.p50), 2),
        num(isOurs || !ours ? undefined : ratio(cpuTotal(ours), cpuTotal(r)), 2),
        num(r.cpu.othersBusyPct, 0),
      ]);
    }
  }
  return table(
    [
      'scenario',
      'C',
      'pay/s',
      'p50',
      'p95',
      'p99',
      '~actions',
      'events (life)',
      'events (answer)',
      'cpu node',
      'cpu temporal',
      'cpu total',
      'ours/peer pay/s',
      'ours/peer p50',
      'ours/peer cpu',
      'others busy %',
    ],
    rows,
  );
}

/** What each payment cost in Temporal, from sampled histories. */
export function temporalTable(results: readonly ScenarioResult[]): string {
  const rows: string[][] = [];
  for (const r of results) {
    for (const [label, h] of [
      [r.wholeLife ? `${r.id} (whole life)` : r.id, r.history],
      [`  ${r.id} (faulted only)`, r.historyFaulted],
    ] as const) {
      if (!h || h.sampled === 0) continue;
      rows.push([
        label,
        String(h.sampled),
        num(h.eventsPerPayment, 1),
        num(h.workflowTasksPerPayment, 1),
        num(h.activityAttemptsPerPayment, 2),
        num(h.localActivitiesPerPayment, 1),
        num(h.timersPerPayment, 1),
        num(h.signalsPerPayment, 1),
        num(h.updatesPerPayment, 1),
        num(h.actionsPerPayment, 1),
        num(h.firstWorkflowTaskScheduleToStartMsP50, 1),
        num(h.activityScheduleToStartMsP50, 1),
        num(h.activityStartToCloseMsP50, 1),
        num(h.startToActivityCompletedMsP50, 1),
        num(h.workflowTaskRunMsP50, 1),
        num(h.startToAnswerMsP50, 1),
        num(
          h.sampled > 0 && h.startToAnswerMsP50 !== undefined ? r.latencyMs.p50 - h.startToAnswerMsP50 : undefined,
          1,
        ),
      ]);
    }
  }
  return table(
    [
      'history sample',
      'n',
      'events',
      'WFTs',
      'act.attempts',
      'LAs',
      'timers',
      'signals',
      'updates',
      '~actions',
      'WFT1 s2s',
      'act s2s',
      'act run',
      'start->act done',
      'WFT run',
      'start->answer',
      'caller p50 - start->answer',
    ],
    rows,
  );
}

/** CPU per payment (the measured part) and memory before/after each scenario. */
export function resourceTable(results: readonly ScenarioResult[]): string {
  return table(
    [
      'scenario',
      'cpu ms/pay node',
      'cpu ms/pay temporal',
      'rss before',
      'rss after',
      'heap before',
      'heap after',
      'temporal rss',
    ],
    results.map((r) => [
      r.id,
      num(r.cpu.benchProcessMsPerPayment, 1),
      num(r.cpu.devServerMsPerPayment, 1),
      num(r.memory.before.rssMiB, 0),
      num(r.memory.after.rssMiB, 0),
      num(r.memory.before.heapUsedMiB, 0),
      num(r.memory.after.heapUsedMiB, 0),
      num(r.memory.after.childrenRssMiB, 0),
    ]),
  );
}
