/** Resource snapshots: memory and CPU of this process, its child processes (the dev server) and the machine. */
import { readFileSync, readdirSync } from 'node:fs';

/** Memory in MiB at one point of the run. */
export interface MemorySnapshot {
  readonly rssMiB: number;
  readonly heapUsedMiB: number;
  readonly heapTotalMiB: number;
  /** Sum of the direct children's VmRSS (the Temporal dev server); null where /proc cannot tell. */
  readonly childrenRssMiB: number | null;
}

const MiB = 1024 * 1024;
const round1 = (x: number): number => Math.round(x * 10) / 10;

/** The pids of this process's direct children, from /proc/self/task/<tid>/children (Linux only). */
function childPids(): number[] {
  const pids = new Set<number>();
  for (const tid of readdirSync('/proc/self/task')) {
    let text: string;
    try {
      text = readFileSync(`/proc/self/task/${tid}/children`, 'utf8').trim();
    } catch {
      continue; // the thread ended since the listing
    }
    for (const pid of text.split(/\s+/).filter(Boolean)) pids.add(Number(pid));
  }
  return [...pids];
}

/** VmRSS of `pid` in KiB; 0 when it is gone. */
export function rssKiB(pid: number): number {
  try {
    const match = /^VmRSS:\s+(\d+)\s+kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return match?.[1] === undefined ? 0 : Number(match[1]);
  } catch {
    return 0;
  }
}

function childrenRssMiB(): number | null {
  try {
    return round1(childPids().reduce((sum, pid) => sum + rssKiB(pid), 0) / 1024);
  } catch {
    return null;
  }
}

/** Takes a snapshot now (after a GC when `--expose-gc` made one available, so heap numbers compare). */
export function memorySnapshot(): MemorySnapshot {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (gc) gc();
  const m = process.memoryUsage();
  return {
    rssMiB: round1(m.rss / MiB),
    heapUsedMiB: round1(m.heapUsed / MiB),
    heapTotalMiB: round1(m.heapTotal / MiB),
    childrenRssMiB: childrenRssMiB(),
  };
}

/** CPU time consumed so far: this process, its children (the dev server), and the whole machine. */
export interface CpuSnapshot {
  readonly atMs: number;
  readonly selfMs: number;
  /** null where /proc cannot tell. */
  readonly childrenMs: number | null;
  /** Machine-wide busy and total CPU time (all cores), from /proc/stat; null where unreadable. */
  readonly machineBusyMs: number | null;
  readonly machineTotalMs: number | null;
}

/** Clock ticks per second of /proc times: 100 on every mainstream Linux build. */
export const TICKS_PER_S = 100;

function childrenCpuMs(): number | null {
  try {
    let ticks = 0;
    for (const pid of childPids()) {
      try {
        // Fields after the command (which may contain spaces): state is field 3, utime 14, stime 15.
        const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
        const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
        ticks += Number(fields[11]) + Number(fields[12]);
      } catch {
        // gone
      }
    }
    return (ticks * 1000) / TICKS_PER_S;
  } catch {
    return null;
  }
}

function machineCpuMs(): { busy: number; total: number } | null {
  try {
    const line = readFileSync('/proc/stat', 'utf8').split('\n')[0] ?? '';
    const ticks = line.trim().split(/\s+/).slice(1).map(Number);
    const total = ticks.slice(0, 8).reduce((s, t) => s + t, 0);
    const idle = (ticks[3] ?? 0) + (ticks[4] ?? 0);
    return { busy: ((total - idle) * 1000) / TICKS_PER_S, total: (total * 1000) / TICKS_PER_S };
  } catch {
    return null;
  }
}

/** One process as /proc shows it: its ids and the CPU it used so far (its own, and that of children it reaped). */
export interface ProcessCpu {
  readonly pid: number;
  readonly ppid: number;
  readonly pgrp: number;
  /** Start time in clock ticks after boot: with the pid, names the process across pid reuse. */
  readonly start: string;
  readonly ownMs: number;
  readonly reapedMs: number;
}

/** Every process now, from /proc/<pid>/stat (Linux only; a process gone between the listing and its read is left out). */
export function readProcesses(): ProcessCpu[] {
  const found: ProcessCpu[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      // After the command (which may hold spaces): state, ppid (index 1), pgrp (2), ..., utime (11), stime (12),
      // cutime (13), cstime (14), ..., starttime (19).
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      const ms = (...ticks: (string | undefined)[]) =>
        (ticks.reduce((sum, t) => sum + Number(t), 0) * 1000) / TICKS_PER_S;
      found.push({
        pid: Number(entry),
        ppid: Number(f[1]),
        pgrp: Number(f[2]),
        start: f[19] ?? '',
        ownMs: ms(f[11], f[12]),
        reapedMs: ms(f[13], f[14]),
      });
    } catch {
      // gone
    }
  }
  return found;
}

/**
 * CPU of every process whose process group is one of `groups` (each supervised service leads its own), with the
 * children they reaped, and of the live children of a group's leader in groups of their own: PostgreSQL's backends
 * each start a session (setsid), so without this the database's work was not counted at all.
 */
export function groupCpuMs(groups: ReadonlySet<number>): number {
  let ms = 0;
  for (const p of readProcesses()) {
    if (groups.has(p.pgrp)) ms += p.ownMs + p.reapedMs;
    else if (groups.has(p.ppid)) ms += p.ownMs;
  }
  return ms;
}

/** A process's command line with spaces between its arguments; '' when it is gone or has none (a kernel thread). */
export function commandLine(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ').trim();
  } catch {
    return '';
  }
}

/** CPU counters now. */
export function cpuSnapshot(): CpuSnapshot {
  const self = process.cpuUsage();
  const machine = machineCpuMs();
  return {
    atMs: performance.now(),
    selfMs: (self.user + self.system) / 1000,
    childrenMs: childrenCpuMs(),
    machineBusyMs: machine?.busy ?? null,
    machineTotalMs: machine?.total ?? null,
  };
}

/** CPU used between two snapshots, per payment, and how busy the rest of the machine was meanwhile. */
export interface CpuUsage {
  /** This process (API, PaymentsClient, workers, simulator, load generator) per payment, ms. */
  readonly benchProcessMsPerPayment: number;
  /** The Temporal dev server per payment, ms; null where /proc cannot tell. */
  readonly devServerMsPerPayment: number | null;
  /** Share of the machine's CPU (all cores) used by other processes meanwhile, %: a noisy neighbour warning. */
  readonly othersBusyPct: number | null;
  /** Share of the machine's CPU used by this bench (process + dev server), %. */
  readonly benchBusyPct: number | null;
}

export function cpuUsage(from: CpuSnapshot, to: CpuSnapshot, payments: number): CpuUsage {
  const self = to.selfMs - from.selfMs;
  const children = to.childrenMs === null || from.childrenMs === null ? null : to.childrenMs - from.childrenMs;
  const total =
    to.machineTotalMs === null || from.machineTotalMs === null ? null : to.machineTotalMs - from.machineTotalMs;
  const busy = to.machineBusyMs === null || from.machineBusyMs === null ? null : to.machineBusyMs - from.machineBusyMs;
  const ours = self + (children ?? 0);
  const per = (x: number) => Math.round((x / Math.max(1, payments)) * 100) / 100;
  return {
    benchProcessMsPerPayment: per(self),
    devServerMsPerPayment: children === null ? null : per(children),
    othersBusyPct: total && busy !== null ? round1(Math.max(0, ((busy - ours) / total) * 100)) : null,
    benchBusyPct: total ? round1(Math.min(100, (ours / total) * 100)) : null,
  };
}
