/**
 * A service process's stop on SIGINT/SIGTERM, with a limit nothing in the process can hold off. The drain's own limit
 * is a timer on the event loop, which cannot fire while the loop is blocked: a log write that keeps retrying a stalled
 * stdout (pino writes synchronously and, on EAGAIN, sleeps and retries without end), a deadlock in Node's shutdown.
 * Under a supervisor its stop timeout SIGKILLs such a process; after the supervisor died (the parent-death signal is
 * what asked for the stop) nobody would. So the stop's first step, before anything that could block, starts a thread
 * of its own that SIGKILLs the process `graceMs` after the drain's limit (a process that exits sooner takes the thread
 * with it).
 */
import { Worker } from 'node:worker_threads';
import type { Logger } from 'pino';

/** What the watchdog thread runs: sleep (off the event loop), say why on stderr if it can, SIGKILL its own process. */
const watchdog = `
const { workerData } = require('node:worker_threads');
Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, workerData.afterMs);
try {
  require('node:fs').writeSync(2, workerData.message + '\\n');
} catch {}
process.kill(workerData.pid, 'SIGKILL');
`;

/** SIGKILLs this process `afterMs` from now unless it has exited, whatever its event loop is doing. */
export function armExitDeadline(afterMs: number, what: string): void {
  const message = JSON.stringify({
    level: 60,
    time: Date.now() + afterMs,
    pid: process.pid,
    component: what,
    msg: `${what} still running ${afterMs} ms after its stop began (its event loop blocked); SIGKILL`,
  });
  // No execArgv: the thread needs no loader (e.g. tsx's hooks), only Node's own modules.
  new Worker(watchdog, { eval: true, execArgv: [], workerData: { afterMs, pid: process.pid, message } }).unref();
}

export interface DrainOnSignals {
  /** The process's name in its log lines (`api draining`). */
  readonly what: string;
  readonly logger: Logger;
  /** How long the drain may take; then the process exits 1 (from the event loop), or is killed `graceMs` later. */
  readonly drainLimitMs: number;
  readonly close: () => Promise<void>;
  /** Default 2 s. */
  readonly graceMs?: number;
}

/**
 * On the first SIGINT or SIGTERM: arms the exit deadline, then drains (`close`) and exits 0, or 1 when the drain
 * failed or outlived its limit.
 */
export function drainOnSignals({ what, logger, drainLimitMs, close, graceMs = 2_000 }: DrainOnSignals): void {
  let stopping = false;
  const stop = (signal: NodeJS.Signals) => {
    if (stopping) return;
    stopping = true;
    armExitDeadline(drainLimitMs + graceMs, what);
    logger.info({ signal }, `${what} draining`);
    setTimeout(() => {
      logger.error({ signal, drainLimitMs }, `the drain did not finish within ${drainLimitMs} ms; exiting`);
      process.exit(1);
    }, drainLimitMs).unref();
    close().then(
      () => process.exit(0),
      (err: unknown) => {
        logger.error({ err }, `${what} close failed`);
        process.exit(1);
      },
    );
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}
