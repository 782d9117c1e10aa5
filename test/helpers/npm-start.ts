/**
 * `npm start` as a test drives it: free ports, the stack spawned in its own process group with its output captured,
 * its processes tracked by pid and start time (for kill tests and the leak check), bounded waits.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { existsSync, readFileSync, readdirSync, readlinkSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';

export const HOST = '127.0.0.1';
export const PROJECT_ROOT = path.resolve(__dirname, '../..');

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Ports handed out in this test file (jest loads modules per file): its concurrent stacks never share one. */
const handedOut = new Set<number>();

/**
 * Distinct free ports below the kernel's ephemeral range: ports the OS hands out for port 0 (the dev server's own
 * HTTP, metrics and internal ports, other test files' servers) or for outgoing connections never land there, so
 * none of them can take one of ours between this check and `npm start` binding it. Nor can another stack of this run:
 * a port is free only until its stack binds it, so two stacks picking at once could both see one free (seen: a
 * stack's simulator port was another's web UI, its merchant set-up answered "missing csrf token"). Each jest worker
 * picks from a slice of its own (JEST_WORKER_ID; its files run one at a time), and within a file a port is handed
 * out once.
 */
export async function freePorts(count: number): Promise<number[]> {
  let low = 32_768;
  try {
    low = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]) || low;
  } catch {
    // not Linux: keep the IANA default
  }
  const slices = 8;
  const worker = Number(process.env.JEST_WORKER_ID);
  const width = Math.floor((low - 10_000) / slices);
  // Outside jest (or past 8 workers) the whole range, as before.
  const [floor, ceiling] =
    Number.isInteger(worker) && worker >= 1 && worker <= slices
      ? [10_000 + (worker - 1) * width, 10_000 + worker * width]
      : [10_000, low];
  const ports: number[] = [];
  for (let attempt = 0; ports.length < count && attempt < 1_000; attempt++) {
    const port = floor + Math.floor(Math.random() * Math.max(1, ceiling - floor));
    if (handedOut.has(port) || ports.includes(port)) continue;
    // Taken before the await: a concurrent call cannot pick it while this one checks it.
    handedOut.add(port);
    if (await portIsFree(port)) ports.push(port);
  }
  if (ports.length < count) throw new Error(`no ${count} free ports between ${floor} and ${ceiling}`);
  return ports;
}

/** The ports `npm start` binds, each free. */
export interface StackPorts {
  readonly temporalPort: number;
  readonly uiPort: number;
  readonly simulatorPort: number;
  readonly apiPort: number;
  readonly workerMetricsPort: number;
  readonly sdkMetricsPort: number;
}

export function portIsFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = net.createServer();
    probe.once('error', () => resolve(false));
    probe.listen(port, HOST, () => probe.close(() => resolve(true)));
  });
}

/** A process by pid and start time (field 22 of /proc/<pid>/stat), so a reused pid is never mistaken for it. */
export interface Proc {
  readonly pid: number;
  readonly ppid: number;
  readonly start: string;
  readonly state: string;
}

export function readProc(pid: number): Proc | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // `pid (comm) state ppid ...`: comm may hold spaces and parentheses, so split after the last ')'.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return { pid, state: fields[0] ?? '', ppid: Number(fields[1]), start: fields[19] ?? '' };
  } catch {
    return undefined; // gone
  }
}

/** Every live descendant of `root` (npm → sh → tsx → start.ts → dev server, simulator, worker, API). */
export function descendants(root: number): Proc[] {
  if (!existsSync('/proc')) return [];
  const table = readdirSync('/proc')
    .filter((name) => /^\d+$/.test(name))
    .map((name) => readProc(Number(name)))
    .filter((p): p is Proc => p !== undefined);
  const found: Proc[] = [];
  const queue = [root];
  while (queue.length > 0) {
    const parent = queue.shift();
    for (const p of table) {
      if (p.ppid === parent && !found.some((f) => f.pid === p.pid)) {
        found.push(p);
        queue.push(p.pid);
      }
    }
  }
  return found;
}

export function stillRunning(p: Proc): boolean {
  const now = readProc(p.pid);
  return now !== undefined && now.start === p.start && now.state !== 'Z';
}

export function killQuietly(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(pid, signal);
  } catch {
    // already gone
  }
}

/** A file's text, or '' when it cannot be read (a process gone meanwhile, a log not written). */
const readOrEmpty = (file: string): string => {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return '';
  }
};

/** A process's command line, '' once it is gone. */
const commandOf = (pid: number): string => readOrEmpty(`/proc/${pid}/cmdline`).split('\0').join(' ');

/**
 * Where a process's stdout and stderr go, and for a socket who holds its other end and what waits in its queues
 * (`ss -xpn`: Recv-Q/Send-Q; a full send queue with a live peer that never reads makes every write EAGAIN); and the
 * kernel wait of each of its threads. For a process that outlived its supervisor: what it may be blocked on.
 */
function stdioAndThreads(pid: number): string {
  let sockets = '';
  try {
    sockets = execFileSync('ss', ['-xpn'], { encoding: 'utf8', timeout: 5_000 });
  } catch {
    sockets = '';
  }
  const stdio = [1, 2].map((fd) => {
    let target = '';
    try {
      target = readlinkSync(`/proc/${pid}/fd/${fd}`);
    } catch {
      return `fd ${fd}: closed`;
    }
    const inode = /^socket:\[(\d+)\]$/.exec(target)?.[1];
    const lines =
      inode === undefined ? [] : sockets.split('\n').filter((l) => new RegExp(`\\s${inode}\\s`).test(` ${l} `));
    return `fd ${fd}: ${target}${lines.map((l) => `\n        ${l.replace(/\s+/g, ' ').trim()}`).join('')}`;
  });
  let threads: string[] = [];
  try {
    threads = readdirSync(`/proc/${pid}/task`).map((tid) => readOrEmpty(`/proc/${pid}/task/${tid}/wchan`) || '-');
  } catch {
    threads = [];
  }
  const waits = [...new Set(threads)].map((w) => `${w} x${threads.filter((t) => t === w).length}`).join(', ');
  return `${stdio.join('\n    ')}\n    threads' kernel waits: ${waits}`;
}

/** The services whose logs `npm start` writes (`<state>.logs/<service>.log`), by their entry file. */
const SERVICE_ENTRIES = {
  api: 'src/api-main.ts',
  worker: 'src/worker.ts',
  simulator: 'src/simulator/main.ts',
} as const;

/** The whole local stack, started as the README says, with its output captured. */
export class Stack {
  readonly child: ChildProcess;
  readonly spawnedAt = Date.now();
  output = '';
  exit: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  private closed = false;
  /** Every process the stack started, as last seen: for the leak check and the last-resort kill. */
  readonly processes = new Map<number, Proc>();

  constructor(private readonly env: NodeJS.ProcessEnv) {
    // `npm start`, in its own process group (so the group can get the terminal's Ctrl-C) and its own session.
    this.child = spawn('npm', ['run', 'start', '--silent'], {
      cwd: PROJECT_ROOT,
      env,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const append = (chunk: Buffer) => {
      this.output += chunk.toString();
    };
    this.child.stdout?.on('data', append);
    this.child.stderr?.on('data', append);
    this.child.once('exit', (code, signal) => {
      this.exit = { code, signal };
    });
    this.child.once('close', () => {
      this.closed = true;
    });
    this.child.once('error', (err) => {
      this.output += `\n[e2e] spawn failed: ${err.message}\n`;
      this.exit ??= { code: -1, signal: null };
    });
  }

  get pid(): number {
    if (this.child.pid === undefined) throw new Error('npm start did not spawn');
    return this.child.pid;
  }

  elapsedS(): string {
    return ((Date.now() - this.spawnedAt) / 1000).toFixed(1);
  }

  tail(lines = 60): string {
    return this.output.split('\n').slice(-lines).join('\n');
  }

  /**
   * Records the stack's processes now (call it whenever more may have started); never after npm exited, since its
   * pid may belong to another process by then.
   */
  snapshot(): void {
    if (this.exit) return;
    for (const p of descendants(this.pid)) this.processes.set(p.pid, p);
    const self = readProc(this.pid);
    if (self) this.processes.set(self.pid, self);
  }

  leftovers(): Proc[] {
    return [...this.processes.values()].filter(stillRunning);
  }

  describeLeftovers(): string {
    return this.leftovers()
      .map((p) => `${p.pid} ${commandOf(p.pid).slice(0, 160) || '?'}`)
      .join('; ');
  }

  /**
   * What a process left running is doing: its /proc state and signal masks (a SIGTERM pending, blocked or caught; a
   * thread sleeping or running) and the last lines of its log in the stack's logs directory (scripts/start.ts writes
   * `<state>.logs/<service>.log`). For the failure message of a leak check, so a rare leftover can be explained.
   */
  diagnoseLeftovers(): string {
    const logsDir = this.env.TEMPORAL_DB_FILE?.replace(/\.sqlite$/, '.logs');
    return this.leftovers()
      .map((p) => {
        const status = readOrEmpty(`/proc/${p.pid}/status`)
          .split('\n')
          .filter((l) => /^(State|SigPnd|ShdPnd|SigBlk|SigIgn|SigCgt|Threads):/.test(l))
          .join(' ');
        const wchan = readOrEmpty(`/proc/${p.pid}/wchan`);
        const cmd = commandOf(p.pid);
        const service = Object.entries(SERVICE_ENTRIES).find(([, entry]) => cmd.includes(entry))?.[0];
        const log =
          logsDir && service
            ? readOrEmpty(path.join(logsDir, `${service}.log`))
                .trim()
                .split('\n')
                .slice(-12)
                .join('\n      ')
            : '';
        return (
          `${p.pid} ${cmd.slice(0, 120)}\n    ${status} wchan=${wchan}\n    ${stdioAndThreads(p.pid)}\n` +
          `    last log lines:\n      ${log}`
        );
      })
      .join('\n');
  }

  /**
   * Polls `check` until it holds, or fails after `timeoutMs` with the stack's last output; fails at once if the stack
   * exits meanwhile, unless `afterExit`.
   */
  async until(
    what: string,
    check: () => boolean | Promise<boolean>,
    timeoutMs: number,
    { intervalMs = 250, afterExit = false } = {},
  ): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (await check()) return;
      if (this.exit && !afterExit) {
        throw new Error(`npm start exited (${JSON.stringify(this.exit)}) before ${what}:\n${this.tail()}`);
      }
      if (Date.now() > deadline) {
        throw new Error(`no ${what} within ${timeoutMs / 1000} s (after ${this.elapsedS()} s):\n${this.tail()}`);
      }
      await sleep(intervalMs);
    }
  }

  /** Ctrl-C: SIGINT to the whole foreground process group, exactly what a terminal does. */
  interrupt(): void {
    process.kill(-this.pid, 'SIGINT');
  }

  /** Last resort: SIGKILL the group and every process the stack started (each child has its own group). */
  async kill(): Promise<void> {
    this.snapshot();
    if (!this.exit) killQuietly(-this.pid, 'SIGKILL');
    for (const p of this.leftovers()) killQuietly(p.pid, 'SIGKILL');
    const deadline = Date.now() + 10_000;
    while ((!this.closed || this.leftovers().length > 0) && Date.now() < deadline) await sleep(100);
    this.child.stdout?.destroy();
    this.child.stderr?.destroy();
  }

  get isClosed(): boolean {
    return this.closed;
  }
}

/** The ports `npm start` binds, each free when chosen. */
export interface StackPorts {
  readonly temporalPort: number;
  readonly uiPort: number;
  readonly simulatorPort: number;
  readonly apiPort: number;
  readonly workerMetricsPort: number;
  readonly sdkMetricsPort: number;
}

/**
 * Free ports for every port `npm start` binds and the environment that gives them to it, with its state in `dbFile`
 * and a task queue of its own; `extra` adds or overrides variables.
 */
export async function npmStartEnvironment(
  dbFile: string,
  extra: NodeJS.ProcessEnv = {},
): Promise<{ env: NodeJS.ProcessEnv; ports: StackPorts }> {
  const [temporalPort, uiPort, simulatorPort, apiPort, workerMetricsPort, sdkMetricsPort] = (await freePorts(6)) as [
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  const ports = { temporalPort, uiPort, simulatorPort, apiPort, workerMetricsPort, sdkMetricsPort };
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    TEMPORAL_PORT: String(temporalPort),
    TEMPORAL_UI_PORT: String(uiPort),
    SIMULATOR_PORT: String(simulatorPort),
    PORT: String(apiPort),
    // Free ports for the metrics endpoints too: other end-to-end tests may run beside this one.
    WORKER_METRICS_ADDRESS: `${HOST}:${workerMetricsPort}`,
    SDK_METRICS_ADDRESS: `${HOST}:${sdkMetricsPort}`,
    TEMPORAL_DB_FILE: dbFile,
    TASK_QUEUE: `e2e-${Math.random().toString(36).slice(2)}`,
    ...extra,
  };
  return { env, ports };
}
