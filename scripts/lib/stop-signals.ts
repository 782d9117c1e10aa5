/**
 * How a stack's supervisor is told to stop: Ctrl-C (SIGINT), SIGTERM, and SIGHUP, which a terminal that closes sends
 * its jobs (without a handler Node dies at once and nothing is drained). A closed terminal also fails every later write
 * to it (EIO, EPIPE): those errors are dropped, so the stop goes on quietly instead of crashing half-way.
 */

/** Calls `stop` on SIGINT, SIGTERM and SIGHUP (as often as they come: `stop` must be idempotent). */
export function onStopSignals(stop: (signal: NodeJS.Signals) => void): void {
  for (const stream of [process.stdout, process.stderr]) stream.on('error', () => undefined);
  // `on`, not `once`: Ctrl-C may reach the process twice (the terminal's process group, then a relay), and a second,
  // unhandled one would kill it mid-drain.
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(signal, () => stop(signal));
}
