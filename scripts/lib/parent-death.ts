/**
 * Children that die with the process that started them. On Linux the kernel does it: util-linux's `setpriv
 * --pdeathsig SIG` asks for SIG when the parent exits, however it exits (SIGKILL included), then execs the command
 * itself, so the child keeps its pid and nothing stays in between. The parent that counts is the THREAD that spawned
 * the child: Node spawns from its main thread, which lives as long as the process.
 *
 * The same setpriv changes user (PostgreSQL refuses to run as root): one setpriv does both, since the kernel clears a
 * parent-death signal when the user id changes afterwards. Without setpriv (not Linux, or util-linux missing) the
 * command runs as it is (`runuser` changes user) and only the stack file tells a later start what is left over
 * (scripts/lib/stale-stack.ts).
 */
import path from 'node:path';
import { isExecutable } from './temporal-binaries';

/** The `setpriv` executable, when this machine has one. */
export function findSetpriv(env: NodeJS.ProcessEnv = process.env): string | undefined {
  if (process.platform !== 'linux') return undefined;
  const dirs = [...(env.PATH ?? '').split(path.delimiter).filter(Boolean), '/usr/bin', '/bin'];
  return dirs.map((d) => path.join(d, 'setpriv')).find(isExecutable);
}

let setprivPath: string | null | undefined;
const setprivOnce = (): string | undefined => {
  if (setprivPath === undefined) setprivPath = findSetpriv() ?? null;
  return setprivPath ?? undefined;
};

/** How to run `command` so that it receives `signal` when this process dies, as `user` when given. */
export interface ParentDeathOptions {
  readonly signal: NodeJS.Signals;
  /** Run as this user (with its primary group and supplementary groups). */
  readonly user?: string;
  /** The setpriv to use; default the machine's; `null`: none (the fallback). */
  readonly setpriv?: string | null;
}

/** The command and arguments that run `command args` as {@link ParentDeathOptions} says. */
export function dieWithParent(
  command: string,
  args: readonly string[],
  options: ParentDeathOptions,
): { readonly command: string; readonly args: string[]; readonly parentDeath: boolean } {
  const setpriv = options.setpriv === undefined ? setprivOnce() : (options.setpriv ?? undefined);
  if (setpriv) {
    const user = options.user ? [`--reuid=${options.user}`, `--regid=${options.user}`, '--init-groups'] : [];
    return {
      command: setpriv,
      args: [...user, `--pdeathsig=${options.signal}`, '--', command, ...args],
      parentDeath: true,
    };
  }
  if (options.user)
    return { command: 'runuser', args: ['-u', options.user, '--', command, ...args], parentDeath: false };
  return { command, args: [...args], parentDeath: false };
}
