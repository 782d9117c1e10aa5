/**
 * The ports a stack binds, each checked before anything starts: a port that is taken is refused with the variable
 * that moves it and, where /proc tells, the process that holds it.
 */
import net from 'node:net';
import { commandLine, listenerOf } from './processes';

/** One port the stack binds: what it is for and how to move it (e.g. `set SIMULATOR_PORT`). */
export interface StackPort {
  readonly port: number;
  readonly purpose: string;
  /** How to choose another one: names the variable. */
  readonly change: string;
}

/** Who holds `port`, as a phrase (`pid 123 (node .../src/simulator/main.ts)`), or '' when /proc does not tell. */
export function holderOf(port: number): string {
  const pid = listenerOf(port);
  if (pid === undefined) return '';
  const cmd = commandLine(pid);
  return `pid ${pid}${cmd ? ` (${cmd.length > 140 ? `${cmd.slice(0, 140)} ...` : cmd})` : ''}`;
}

/** Resolves when `p.port` can be bound on `host`; rejects with a message naming the variable and the holder. */
export function assertPortFree(p: StackPort, host = '127.0.0.1'): Promise<void> {
  return new Promise((resolve, reject) => {
    const probe = net.createServer();
    probe.once('error', (err: NodeJS.ErrnoException) => {
      if (err.code !== 'EADDRINUSE') {
        reject(new Error(`Cannot bind ${host}:${p.port} (${p.purpose}): ${err.message}`));
        return;
      }
      const holder = holderOf(p.port);
      reject(
        new Error(
          `Port ${p.port} (${p.purpose}) is already in use on ${host}${holder ? ` by ${holder}` : ''}. ` +
            `Stop that process, or ${p.change}.`,
        ),
      );
    });
    probe.listen(p.port, host, () => probe.close(() => resolve()));
  });
}

/**
 * Checks every port in order; the first one taken rejects. `waitMs`: a taken port is tried again every 100 ms for that
 * long first, for ports whose holders were just stopped (a process that exited may release its socket a moment
 * after its pid is gone: an e2e run saw the simulator's port refused 0.0 s after its stale process was stopped).
 */
export async function assertPortsFree(
  ports: readonly StackPort[],
  host = '127.0.0.1',
  { waitMs = 0 }: { readonly waitMs?: number } = {},
): Promise<void> {
  const deadline = Date.now() + waitMs;
  for (const p of ports) {
    for (;;) {
      try {
        await assertPortFree(p, host);
        break;
      } catch (err) {
        if (Date.now() >= deadline) throw err;
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    }
  }
}
