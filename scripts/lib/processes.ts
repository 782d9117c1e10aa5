/**
 * Processes as the stack scripts record and check them: by pid AND start time (field 22 of /proc/<pid>/stat), so a pid
 * the kernel handed to another program since is never taken for ours; and who listens on a TCP port. Linux's /proc;
 * elsewhere every answer is "unknown" (undefined) and callers say what they could not check.
 */
import { readFileSync, readdirSync, readlinkSync } from 'node:fs';

/** A process as recorded: its pid and, where /proc tells it, when it started (clock ticks since boot). */
export interface ProcessRef {
  readonly pid: number;
  readonly start?: string;
}

/** The start time of `pid` (clock ticks since boot), undefined when it is gone or /proc cannot tell. */
export function processStart(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // `pid (comm) state ppid ...`: comm may hold spaces and parentheses, so split after the last ')'.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return fields[0] === 'Z' ? undefined : fields[19];
  } catch {
    return undefined;
  }
}

/** The command line of `pid`, space separated, or undefined. */
export function commandLine(pid: number): string | undefined {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean).join(' ');
  } catch {
    return undefined;
  }
}

/** Whether a signal can reach `pid` (it exists and is not a zombie where /proc tells). */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (err) {
    // EPERM: it exists but belongs to someone else.
    if ((err as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  try {
    return !/\) Z /.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return true; // no /proc: kill(0) is all we know
  }
}

/**
 * Whether `ref` still names the process that was recorded: alive and, when a start time was recorded and /proc tells
 * one, the same start time.
 */
export function stillSame(ref: ProcessRef): boolean {
  if (!isAlive(ref.pid)) return false;
  if (ref.start === undefined) return true;
  const now = processStart(ref.pid);
  return now === undefined || now === ref.start;
}

/** Sends `signal` to the process group `pid` leads, else to the process alone; false when neither exists. */
export function signalGroup(pid: number, signal: NodeJS.Signals): boolean {
  for (const target of [-pid, pid]) {
    try {
      process.kill(target, signal);
      return true;
    } catch {
      // not a group leader, or gone
    }
  }
  return false;
}

/** The inodes of TCP sockets listening on `port` (IPv4 and IPv6). */
function listeningInodes(port: number): Set<string> {
  const inodes = new Set<string>();
  const hex = port.toString(16).toUpperCase().padStart(4, '0');
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text: string;
    try {
      text = readFileSync(table, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      // local_address is `ADDR:PORT` in hex; state 0A is LISTEN; the inode is the tenth field.
      if (f[1]?.endsWith(`:${hex}`) && f[3] === '0A' && f[9]) inodes.add(f[9]);
    }
  }
  return inodes;
}

/** The pid of a process that listens on TCP `port`, when /proc tells (and we may read its descriptors). */
export function listenerOf(port: number): number | undefined {
  const inodes = listeningInodes(port);
  if (inodes.size === 0) return undefined;
  let pids: string[];
  try {
    pids = readdirSync('/proc').filter((name) => /^\d+$/.test(name));
  } catch {
    return undefined;
  }
  for (const pid of pids) {
    let fds: string[];
    try {
      fds = readdirSync(`/proc/${pid}/fd`);
    } catch {
      continue;
    }
    for (const fd of fds) {
      try {
        const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
        if (m?.[1] && inodes.has(m[1])) return Number(pid);
      } catch {
        // closed meanwhile
      }
    }
  }
  return undefined;
}
