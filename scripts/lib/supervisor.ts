/**
 * Runs the stack's processes and keeps them running: a process that exits while the stack is up is restarted after a
 * backoff, with a log line, until it crashes too often (its {@link CrashPolicy}), which stops the whole stack. Used by
 * `npm start` and `npm run cluster`. Every process dies with the supervisor (scripts/lib/parent-death.ts): a
 * supervisor killed with SIGKILL leaves nothing running.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { CrashPolicy, type CrashPolicyOptions } from './crash-policy';
import { dieWithParent } from './parent-death';
import { processStart } from './processes';

/** One supervised process. */
export interface ServiceSpec {
  /** Unique; used as the log prefix. */
  readonly name: string;
  readonly command: string;
  readonly args: readonly string[];
  readonly env?: NodeJS.ProcessEnv;
  readonly cwd?: string;
  /** Run as this user (e.g. `postgres`, which refuses to run as root). */
  readonly runAs?: string;
  /** Polled until true after each (re)start; the start fails when it is not within `readyTimeoutMs` (default 60 s). */
  readonly ready?: () => Promise<boolean>;
  /** Ready once an output line matches (e.g. the worker's "worker running"); with `ready`, both must hold. */
  readonly readyLine?: RegExp;
  readonly readyTimeoutMs?: number;
  /** Runs once the process is ready, after every (re)start (e.g. configure the simulator's merchant). */
  readonly afterReady?: () => Promise<void>;
  /**
   * Signal that asks it to stop (default SIGTERM); SIGKILL after `stopTimeoutMs` (default 15 s). It is also the signal
   * the process gets when the supervisor dies.
   */
  readonly stopSignal?: NodeJS.Signals;
  readonly stopTimeoutMs?: number;
  /** Stopped in descending tiers, a tier's processes in parallel; default 0. */
  readonly tier?: number;
  /** Its output lines, without the prefix; default: written to stdout/stderr with `[name] `. */
  readonly output?: (line: string, stream: 'stdout' | 'stderr') => void;
  /** Its last output lines, shown under the log line of a crash or a failed start (e.g. from its log file). */
  readonly lastLines?: () => readonly string[];
}

/** What a service is doing now. */
export interface ServiceStatus {
  readonly name: string;
  readonly pid: number | undefined;
  /** The process's start time where /proc tells it: with the pid, what a later start checks before it stops it. */
  readonly start: string | undefined;
  readonly stopSignal: NodeJS.Signals;
  readonly restarts: number;
  readonly state: 'starting' | 'running' | 'restarting' | 'stopped';
}

export interface SupervisorOptions {
  readonly log: (line: string) => void;
  readonly crashPolicy?: CrashPolicyOptions;
  /** Called when a service crashed too often: the stack should stop (the supervisor has stopped restarting). */
  readonly onGiveUp: (name: string, reason: string) => void;
  /** Called whenever a pid or state changes (e.g. to write a file the soak reads). */
  readonly onChange?: (services: ServiceStatus[]) => void;
}

interface Service {
  readonly spec: ServiceSpec;
  readonly policy: CrashPolicy;
  child: ChildProcess | undefined;
  childStart: string | undefined;
  restarts: number;
  state: ServiceStatus['state'];
  /** Set while the supervisor itself stops or replaces the process: its exit is not a crash. */
  expectedExit: boolean;
  restartTimer: NodeJS.Timeout | undefined;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Keeps services running; {@link stop} ends them all. */
export class Supervisor {
  private readonly services = new Map<string, Service>();
  private stopping = false;

  constructor(private readonly options: SupervisorOptions) {}

  /** Starts a service and waits until it is ready (its first start is not retried: a broken setup fails fast). */
  async start(spec: ServiceSpec): Promise<void> {
    if (this.services.has(spec.name)) throw new Error(`service ${spec.name} already started`);
    const service: Service = {
      spec,
      policy: new CrashPolicy(this.options.crashPolicy),
      child: undefined,
      childStart: undefined,
      restarts: 0,
      state: 'starting',
      expectedExit: false,
      restartTimer: undefined,
    };
    this.services.set(spec.name, service);
    await this.launch(service);
  }

  /** Current pids and states, in start order. */
  status(): ServiceStatus[] {
    return [...this.services.values()].map((s) => ({
      name: s.spec.name,
      pid: s.child?.pid,
      start: s.childStart,
      stopSignal: s.spec.stopSignal ?? 'SIGTERM',
      restarts: s.restarts,
      state: s.state,
    }));
  }

  pid(name: string): number | undefined {
    return this.services.get(name)?.child?.pid;
  }

  /** Stops every service, highest tier first (a tier in parallel); idempotent. */
  async stop(): Promise<void> {
    this.stopping = true;
    const all = [...this.services.values()];
    for (const s of all) clearTimeout(s.restartTimer);
    const tiers = [...new Set(all.map((s) => s.spec.tier ?? 0))].sort((a, b) => b - a);
    for (const tier of tiers) {
      await Promise.all(all.filter((s) => (s.spec.tier ?? 0) === tier).map((s) => this.stopService(s)));
    }
  }

  private changed(): void {
    this.options.onChange?.(this.status());
  }

  private async launch(service: Service): Promise<void> {
    const { spec } = service;
    const run = dieWithParent(spec.command, spec.args, {
      signal: spec.stopSignal ?? 'SIGTERM',
      ...(spec.runAs === undefined ? {} : { user: spec.runAs }),
    });
    const child = spawn(run.command, run.args, {
      cwd: spec.cwd,
      env: spec.env ?? process.env,
      // Own process group: Ctrl-C reaches only the supervisor, which stops children in order.
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    service.child = child;
    service.childStart = child.pid === undefined ? undefined : processStart(child.pid);
    service.expectedExit = false;
    service.state = 'starting';
    let sawReadyLine = spec.readyLine === undefined;
    const print =
      spec.output ??
      ((line: string, stream: 'stdout' | 'stderr') =>
        (stream === 'stdout' ? process.stdout : process.stderr).write(`[${spec.name}] ${line}\n`));
    const write = (line: string, stream: 'stdout' | 'stderr') => {
      if (!sawReadyLine && spec.readyLine?.test(line)) sawReadyLine = true;
      print(line, stream);
    };
    const pipe = (stream: 'stdout' | 'stderr') => {
      let partial = '';
      child[stream]?.on('data', (d: Buffer) => {
        const lines = (partial + d.toString()).split('\n');
        partial = lines.pop() ?? '';
        for (const l of lines) if (l.length > 0) write(l, stream);
      });
      child[stream]?.on('end', () => {
        if (partial.length > 0) write(partial, stream);
        partial = '';
      });
    };
    pipe('stdout');
    pipe('stderr');
    let spawnError: Error | undefined;
    child.once('error', (err) => {
      spawnError = err;
    });
    child.once('exit', (code, signal) => this.exited(service, child, code, signal));
    this.changed();

    const deadline = Date.now() + (spec.readyTimeoutMs ?? 60_000);
    if (spec.ready || spec.readyLine) {
      for (;;) {
        if (spawnError) throw new Error(`${spec.name} could not start: ${spawnError.message}`);
        if (child.exitCode !== null || child.signalCode !== null) {
          throw new Error(
            withLastLines(spec, `${spec.name} exited (${child.signalCode ?? `code ${child.exitCode}`}) while starting`),
          );
        }
        if (this.stopping) return;
        if (sawReadyLine && (spec.ready === undefined || (await spec.ready().catch(() => false)))) break;
        if (Date.now() > deadline) {
          throw new Error(
            withLastLines(spec, `${spec.name} was not ready within ${(spec.readyTimeoutMs ?? 60_000) / 1000} s`),
          );
        }
        await sleep(200);
      }
    }
    if (spec.afterReady) await spec.afterReady();
    if (service.child === child && child.exitCode === null && child.signalCode === null) {
      service.state = 'running';
      this.changed();
    }
  }

  private exited(service: Service, child: ChildProcess, code: number | null, signal: NodeJS.Signals | null): void {
    if (service.child !== child) return;
    const how = signal ?? `code ${code}`;
    if (this.stopping || service.expectedExit) {
      service.state = 'stopped';
      this.changed();
      return;
    }
    // A clean exit (code 0) was asked for by someone (a deploy's SIGTERM, drained): a stop, not a failure. It is
    // restarted without spending the crash budget, which is for processes that fail.
    const verdict =
      code === 0 && signal === null
        ? { action: 'restart' as const, delayMs: 500, crashesInWindow: 0 }
        : service.policy.crashed();
    if (verdict.action === 'give_up') {
      service.state = 'stopped';
      this.changed();
      const reason =
        `${service.spec.name} exited (${how}): ${verdict.crashesInWindow} crashes within ` +
        `${service.policy.windowMs / 1000} s`;
      this.options.log(withLastLines(service.spec, `${reason}; not restarting it, stopping the stack.`));
      this.options.onGiveUp(service.spec.name, reason);
      return;
    }
    service.state = 'restarting';
    this.changed();
    this.options.log(
      withLastLines(
        service.spec,
        `${service.spec.name} exited unexpectedly (${how}); restarting in ${(verdict.delayMs / 1000).toFixed(1)} s ` +
          `(crash ${verdict.crashesInWindow} of at most ${service.policy.maxCrashes - 1} within ` +
          `${service.policy.windowMs / 1000} s)`,
      ),
    );
    const crashedAt = Date.now();
    service.restartTimer = setTimeout(() => {
      if (this.stopping) return;
      service.restarts += 1;
      this.launch(service).then(
        () => {
          if (this.stopping || service.child?.pid === undefined) return;
          this.options.log(
            `${service.spec.name} restarted (pid ${service.child.pid}), ready ` +
              `${((Date.now() - crashedAt) / 1000).toFixed(1)} s after the crash`,
          );
        },
        (err: unknown) => {
          // A restart that does not come up counts as another crash (its exit handler restarts it); one that hangs
          // unready is killed, which does the same.
          this.options.log(`${service.spec.name} restart failed: ${err instanceof Error ? err.message : String(err)}`);
          const current = service.child;
          if (current && current.exitCode === null && current.signalCode === null) killGroup(current, 'SIGKILL');
        },
      );
    }, verdict.delayMs);
  }

  private stopService(service: Service): Promise<void> {
    const child = service.child;
    service.expectedExit = true;
    if (!child || child.exitCode !== null || child.signalCode !== null) {
      service.state = 'stopped';
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const timer = setTimeout(() => killGroup(child, 'SIGKILL'), service.spec.stopTimeoutMs ?? 15_000);
      child.once('exit', () => {
        clearTimeout(timer);
        resolve();
      });
      killGroup(child, service.spec.stopSignal ?? 'SIGTERM');
    });
  }
}

/** `message`, then the service's last output lines (when it keeps them), indented. */
function withLastLines(spec: ServiceSpec, message: string): string {
  const lines = spec.lastLines?.() ?? [];
  return lines.length === 0 ? message : `${message}; its last lines:\n${lines.map((l) => `    ${l}`).join('\n')}`;
}

/** Signals the child's whole process group (it is its leader), so whatever it spawned goes too. */
function killGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  if (child.pid === undefined) return;
  try {
    process.kill(-child.pid, signal);
  } catch {
    try {
      child.kill(signal);
    } catch {
      // already gone
    }
  }
}
