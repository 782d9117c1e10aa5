/**
 * `npm run bench:suite [-- <jest arguments>]`: where the test suite's CPU goes. On two cores `npm test` is bound by
 * CPU, not by waits (README, "How long npm test takes"), so a faster suite needs to know whose CPU to cut.
 *
 * Runs jest (`--json`, the arguments given) while reading every process's CPU from /proc every 500 ms, and each test
 * file's own CPU (bench/suite-cpu-setup.ts: `process.cpuUsage()` from the file's first line to its first afterAll
 * hook, so its teardown is left out; what its worker threads use counts, processes it spawns do not), then prints the wall time, the machine's busy
 * CPU, CPU by kind of process, the files that used most CPU in their jest worker, and the slowest files. A process
 * that starts and ends between two reads is not seen: what no kind accounts for is printed as such. Linux only.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { type ProcessCpu, commandLine, cpuSnapshot, readProcesses } from './resources';

/** The environment variable naming the file the setup appends `<cpu ms> <test file>` lines to. */
export const SUITE_CPU_FILE_ENV = 'SUITE_CPU_FILE';

const kinds: readonly (readonly [RegExp, string])[] = [
  [/jest-worker|processChild/, 'jest workers (test files, their in-process Temporal workers and clients)'],
  [/temporal server start-dev/, 'Temporal dev servers (the run’s, and those of npm start stacks)'],
  [/temporal-test-server/, 'Temporal time-skipping test servers'],
  [/scripts\/start\.ts|src\/worker\.ts|src\/api-main\.ts|src\/simulator\/main\.ts/, 'npm start stacks (test/e2e)'],
  [/test\/[\w/.-]+\.ts/, 'processes tests spawn from test/ (worker processes, fixtures)'],
  [/eslint|typescript\/bin\/tsc|depcruise/, 'lint and type checks run by tests'],
  [/postgres/, 'PostgreSQL'],
  [/redis-server/, 'Redis'],
  [/chrom/, 'Chromium'],
  [/stripe-mock/, 'stripe-mock'],
  [/jest/, 'jest (parent)'],
];

/** The kind of process a command line names, for the report. */
export function processKind(cmdline: string): string {
  for (const [pattern, kind] of kinds) if (pattern.test(cmdline)) return kind;
  const first = cmdline.split(' ')[0] ?? '';
  return first === '' ? 'other' : `other: ${path.basename(first)}`;
}

/** What one process used during the run: its CPU at the last read less its CPU at the first. */
export interface ProcessUse {
  readonly kind: string;
  readonly cpuMs: number;
}

/** CPU per kind, largest first, with how many processes each had. */
export function byKind(uses: readonly ProcessUse[]): { kind: string; cpuMs: number; processes: number }[] {
  const sums = new Map<string, { cpuMs: number; processes: number }>();
  for (const u of uses) {
    const s = sums.get(u.kind) ?? { cpuMs: 0, processes: 0 };
    s.cpuMs += u.cpuMs;
    s.processes += 1;
    sums.set(u.kind, s);
  }
  return [...sums].map(([kind, s]) => ({ kind, ...s })).sort((a, b) => b.cpuMs - a.cpuMs);
}

/** Per-file lines (`<cpu ms> <file>`) as written by the setup, largest first. */
export function parseFileCpu(text: string): { file: string; cpuMs: number }[] {
  return text
    .split('\n')
    .map((line) => /^(\d+(?:\.\d+)?) (.+)$/.exec(line.trim()))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => ({ file: m[2] as string, cpuMs: Number(m[1]) }))
    .sort((a, b) => b.cpuMs - a.cpuMs);
}

interface Seen {
  readonly kind: string;
  readonly firstMs: number;
  lastMs: number;
}

/** A process across pid reuse: its pid and start time. */
const processKey = (p: ProcessCpu): string => `${p.pid}:${p.start}`;

/** Reads every process's CPU: new processes are named on first sight; `baseline` holds those alive before the run. */
function sample(seen: Map<string, Seen>, baseline: ReadonlyMap<string, number>): void {
  for (const p of readProcesses()) {
    const key = processKey(p);
    const known = seen.get(key);
    if (known) known.lastMs = p.ownMs;
    else seen.set(key, { kind: processKind(commandLine(p.pid)), firstMs: baseline.get(key) ?? 0, lastMs: p.ownMs });
  }
}

const s1 = (ms: number) => (ms / 1000).toFixed(1);

async function main(): Promise<number> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'pw-suite-cpu-'));
  const fileCpu = path.join(dir, 'files.txt');
  const results = path.join(dir, 'jest.json');
  const baseline = new Map(readProcesses().map((p) => [processKey(p), p.ownMs]));
  const seen = new Map<string, Seen>();
  const from = cpuSnapshot();
  const startedAt = Date.now();
  const jest = spawn(
    process.execPath,
    [
      require.resolve('jest/bin/jest'),
      ...process.argv.slice(2),
      '--json',
      `--outputFile=${results}`,
      // Last: jest reads the arguments after an array option as more of its values.
      `--setupFilesAfterEnv=${path.join(__dirname, 'suite-cpu-setup.ts')}`,
    ],
    { stdio: 'inherit', env: { ...process.env, [SUITE_CPU_FILE_ENV]: fileCpu } },
  );
  const timer = setInterval(() => sample(seen, baseline), 500);
  const status = await new Promise<number>((resolve) => jest.once('exit', (code) => resolve(code ?? 1)));
  clearInterval(timer);
  sample(seen, baseline);
  const to = cpuSnapshot();
  const wallMs = Date.now() - startedAt;

  const uses = [...seen.values()].map((s) => ({ kind: s.kind, cpuMs: Math.max(0, s.lastMs - s.firstMs) }));
  const kindsUsed = byKind(uses).filter((k) => k.cpuMs >= 50);
  const busyMs =
    to.machineBusyMs !== null && from.machineBusyMs !== null ? to.machineBusyMs - from.machineBusyMs : null;
  const totalMs =
    to.machineTotalMs !== null && from.machineTotalMs !== null ? to.machineTotalMs - from.machineTotalMs : null;
  const seenMs = uses.reduce((sum, u) => sum + u.cpuMs, 0);
  const lines = [
    '',
    `suite CPU: jest exit ${status}, wall ${s1(wallMs)} s; machine busy ${busyMs === null ? '?' : s1(busyMs)} CPU-s` +
      (busyMs !== null && totalMs ? ` (${((100 * busyMs) / totalMs).toFixed(0)} % of ${os.cpus().length} cores)` : ''),
    '',
    'CPU-s  processes  kind',
    ...kindsUsed.map((k) => `${s1(k.cpuMs).padStart(6)}  ${String(k.processes).padStart(9)}  ${k.kind}`),
  ];
  if (busyMs !== null)
    lines.push(
      `${s1(Math.max(0, busyMs - seenMs)).padStart(6)}  ${''.padStart(9)}  not seen (short-lived processes, other load)`,
    );

  let files: { file: string; cpuMs: number }[] = [];
  try {
    files = parseFileCpu(readFileSync(fileCpu, 'utf8'));
  } catch {
    // no file ran
  }
  if (files.length > 0) {
    const sum = files.reduce((s, f) => s + f.cpuMs, 0);
    lines.push('', `test files' own CPU: ${s1(sum)} s over ${files.length} files; most:`);
    lines.push(...files.slice(0, 15).map((f) => `${s1(f.cpuMs).padStart(6)}  ${f.file}`));
  }
  try {
    const report = JSON.parse(readFileSync(results, 'utf8')) as {
      testResults: { name: string; startTime: number; endTime: number }[];
    };
    const slow = report.testResults
      .map((t) => ({ file: path.relative(process.cwd(), t.name), ms: t.endTime - t.startTime }))
      .sort((a, b) => b.ms - a.ms);
    lines.push('', 'slowest files (wall):', ...slow.slice(0, 10).map((f) => `${s1(f.ms).padStart(6)}  ${f.file}`));
  } catch {
    // jest wrote no results
  }
  console.log(lines.join('\n'));
  rmSync(dir, { recursive: true, force: true });
  return status;
}

if (require.main === module) {
  main().then(
    (code) => process.exit(code),
    (err: unknown) => {
      console.error(err);
      process.exit(1);
    },
  );
}
