/**
 * The stack file (`.temporal/dev-server.stack.json`, `<CLUSTER_DIR>/stack.json`) names the supervisor and every
 * process it runs, each by pid and start time. A start that finds one from a run that did not stop cleanly acts on it
 * before it checks its ports: a supervisor still running is another stack on the same state (refused, naming it); the
 * processes a dead supervisor left are stopped after checking they are the ones recorded (same pid AND start time, so a
 * reused pid is never signalled), each with its own stop signal, then SIGKILL. What cannot be confirmed is named, not
 * touched. With parent-death signals (scripts/lib/parent-death.ts) there is usually nothing left; this covers machines
 * without setpriv and a process that outlived its signal.
 */
import { existsSync, readFileSync } from 'node:fs';
import { type ProcessRef, commandLine, isAlive, processStart, signalGroup, stillSame } from './processes';
import { PROJECT_ROOT } from './temporal-binaries';

/** One process as the stack file records it (extra fields are ignored). */
interface RecordedProcess {
  readonly pid?: number;
  readonly start?: string;
  readonly stopSignal?: NodeJS.Signals;
}

/** The part of a stack file this module reads. */
export interface RecordedStack {
  readonly startPid?: number;
  readonly startStart?: string;
  readonly services?: Record<string, RecordedProcess>;
}

/** A running process as a supervisor reports it (scripts/lib/supervisor.ts's `ServiceStatus`, Redis beside it). */
export interface RunningProcess {
  readonly name: string;
  readonly pid: number | undefined;
  readonly start: string | undefined;
  readonly stopSignal: NodeJS.Signals;
  readonly state: string;
  readonly restarts: number;
}

/** The part of the stack file the next start reads: this supervisor and every process it runs, by pid and start time. */
export function recordStack(processes: readonly RunningProcess[]): RecordedStack {
  const startStart = processStart(process.pid);
  return {
    startPid: process.pid,
    ...(startStart === undefined ? {} : { startStart }),
    services: Object.fromEntries(
      processes.map((p) => [
        p.name,
        { pid: p.pid, start: p.start, stopSignal: p.stopSignal, state: p.state, restarts: p.restarts },
      ]),
    ),
  };
}

/** What a start found and did. */
export interface StaleStackReport {
  /** Processes stopped: `name (pid N)`. */
  readonly stopped: string[];
  /** Processes that may be left over but could not be confirmed as ours: the user decides. */
  readonly unconfirmed: string[];
  readonly tookMs: number;
}

/** Thrown when the recorded supervisor is still running: a second stack on the same state must not start. */
export class StackRunningError extends Error {
  constructor(
    readonly pid: number,
    message: string,
  ) {
    super(message);
    this.name = 'StackRunningError';
  }
}

export interface ReclaimOptions {
  /** What started the stack, for messages: `npm start`, `npm run cluster`. */
  readonly what: string;
  /** How long the stopped processes get for their stop signal before SIGKILL (default 15 s). */
  readonly graceMs?: number;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** A recorded process without a start time is taken as ours only when its command line lies in this project. */
function ours(ref: ProcessRef): boolean {
  if (!stillSame(ref)) return false;
  if (ref.start !== undefined) return true;
  return (commandLine(ref.pid) ?? '').includes(PROJECT_ROOT);
}

/**
 * Reads `file` (when there is one) and stops what a previous, dead supervisor left running; throws
 * {@link StackRunningError} when that supervisor still runs.
 */
export async function reclaimStaleStack(file: string, options: ReclaimOptions): Promise<StaleStackReport> {
  const started = Date.now();
  const none: StaleStackReport = { stopped: [], unconfirmed: [], tookMs: 0 };
  if (!existsSync(file)) return none;
  let stack: RecordedStack;
  try {
    stack = JSON.parse(readFileSync(file, 'utf8')) as RecordedStack;
  } catch {
    return none; // unreadable: informational only
  }
  const supervisor = stack.startPid;
  if (supervisor !== undefined && supervisor !== process.pid) {
    const ref = { pid: supervisor, ...(stack.startStart === undefined ? {} : { start: stack.startStart }) };
    if (ours(ref)) {
      throw new StackRunningError(
        supervisor,
        `Another ${options.what} (pid ${supervisor}) is running this stack (${file}). Stop it first: Ctrl-C in its ` +
          `terminal, or kill ${supervisor}.`,
      );
    }
  }
  const targets: { name: string; ref: ProcessRef; signal: NodeJS.Signals }[] = [];
  const unconfirmed: string[] = [];
  for (const [name, p] of Object.entries(stack.services ?? {})) {
    if (p.pid === undefined || !isAlive(p.pid)) continue;
    const ref = { pid: p.pid, ...(p.start === undefined ? {} : { start: p.start }) };
    if (ours(ref)) targets.push({ name, ref, signal: p.stopSignal ?? 'SIGTERM' });
    else if (p.start === undefined) unconfirmed.push(`${name} (pid ${p.pid}: ${commandLine(p.pid) ?? '?'})`);
    // A recorded start time that differs: the pid belongs to another process now; not ours to name.
  }
  for (const t of targets) signalGroup(t.ref.pid, t.signal);
  const deadline = Date.now() + (options.graceMs ?? 15_000);
  while (targets.some((t) => stillSame(t.ref)) && Date.now() < deadline) await sleep(100);
  for (const t of targets) if (stillSame(t.ref)) signalGroup(t.ref.pid, 'SIGKILL');
  const killDeadline = Date.now() + 5_000;
  while (targets.some((t) => stillSame(t.ref)) && Date.now() < killDeadline) await sleep(50);
  return {
    stopped: targets.map((t) => `${t.name} (pid ${t.ref.pid})`),
    unconfirmed,
    tookMs: Date.now() - started,
  };
}

/** The log lines for a report (none when there was nothing to do). */
export function describeReclaim(report: StaleStackReport, what: string): string[] {
  const lines: string[] = [];
  if (report.stopped.length > 0) {
    lines.push(
      `A previous ${what} ended without stopping its processes; stopped what it left running in ` +
        `${(report.tookMs / 1000).toFixed(1)} s: ${report.stopped.join(', ')}.`,
    );
  }
  if (report.unconfirmed.length > 0) {
    lines.push(
      `A previous ${what} may have left these running, but they could not be confirmed as its own (stop them ` +
        `yourself if they are): ${report.unconfirmed.join('; ')}.`,
    );
  }
  return lines;
}
