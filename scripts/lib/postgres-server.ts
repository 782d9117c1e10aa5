/**
 * A PostgreSQL server run directly (not under the supervisor): the tests' server for the whole jest run, a test's own
 * server it stops, kills and starts again, the bench's. Binaries and data directory as scripts/lib/postgres.ts
 * prepares them; a free port unless one is given.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { rmSync } from 'node:fs';
import net from 'node:net';
import { dieWithParent } from './parent-death';
import { type PostgresBin, databaseUrl, ensureDatabase, postgresAnswers, preparePostgres } from './postgres';

export interface PostgresServerOptions {
  /** Holds the data directory (kept: a restart finds its data). */
  readonly dir: string;
  readonly port?: number;
  /**
   * Whether commits are flushed to disk (default true). The tests run with `fsync=off` and `synchronous_commit=off`
   * (a crashed test server's data is not worth the wait); the bench and `npm start` never do.
   */
  readonly durable?: boolean;
  readonly bin?: PostgresBin;
  readonly log?: (line: string) => void;
}

/** A running (or stopped, then started again) server. */
export interface PostgresServer {
  readonly host: string;
  readonly port: number;
  readonly version: string;
  readonly bin: PostgresBin;
  /** The postmaster's process group leader (runuser as root), while it runs. */
  readonly pid: number | undefined;
  /** The URL of database `name` (superuser `postgres`, trust authentication). */
  url(name: string): string;
  createDatabase(name: string): Promise<string>;
  /** Starts it again on the same data and port (after stop or kill). */
  start(): Promise<void>;
  /** Fast shutdown (SIGINT): open transactions roll back, then a checkpoint. */
  stop(): Promise<void>;
  /** SIGKILL of every process of the server: a crash, recovered from the WAL at the next start. */
  kill(): Promise<void>;
  /** Stops it and, with `removeData`, deletes its directory. */
  close(removeData?: boolean): Promise<void>;
}

/** A port nothing listens on now (the kernel's choice for port 0). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = net.createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as net.AddressInfo;
      probe.close(() => resolve(port));
    });
  });
}

/** Whether any process of the process group `pgid` is still there. */
function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch {
    return false;
  }
}

const notDurable = { fsync: 'off', synchronous_commit: 'off', full_page_writes: 'off' };

/** Prepares (initdb once) and starts a server; resolves once it answers a query. */
export async function startPostgresServer(o: PostgresServerOptions): Promise<PostgresServer> {
  const log = o.log ?? (() => undefined);
  const port = o.port ?? (await freePort());
  const prepared = await preparePostgres({
    dir: o.dir,
    port,
    log,
    output: () => undefined,
    ...(o.bin === undefined ? {} : { bin: o.bin }),
    ...(o.durable === false ? { settings: notDurable } : {}),
  });
  const target = { host: prepared.host, port, user: prepared.user };
  let child: ChildProcess | undefined;
  let exited: Promise<void> = Promise.resolve();

  const start = async () => {
    const output: string[] = [];
    // As root, as the `postgres` user (the spec's `runAs`), dying with this process like the supervisor's children.
    const run = dieWithParent(prepared.spec.command, prepared.spec.args, {
      signal: 'SIGINT',
      ...(prepared.spec.runAs === undefined ? {} : { user: prepared.spec.runAs }),
    });
    const proc = spawn(run.command, run.args, { detached: true, stdio: 'pipe' });
    child = proc;
    exited = new Promise((resolve) => proc.once('exit', () => resolve()));
    const keep = (chunk: Buffer) => {
      output.push(chunk.toString());
      output.splice(0, Math.max(0, output.length - 50));
    };
    proc.stdout?.on('data', keep);
    proc.stderr?.on('data', keep);
    const deadline = Date.now() + 60_000;
    while (!(await postgresAnswers(target))) {
      if (proc.exitCode !== null || Date.now() > deadline) {
        throw new Error(`PostgreSQL did not start (exit ${proc.exitCode}): ${output.join('').slice(-2_000)}`);
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  };
  const signal = async (sig: NodeJS.Signals) => {
    const proc = child;
    if (proc?.pid === undefined || proc.exitCode !== null) return;
    try {
      process.kill(-proc.pid, sig);
    } catch {
      // already gone
    }
    await exited;
    // runuser exits before the postmaster and its backends are gone; a start before then finds their lock file.
    for (const deadline = Date.now() + 30_000; groupAlive(proc.pid) && Date.now() < deadline;) {
      await new Promise((r) => setTimeout(r, 50));
    }
    child = undefined;
  };

  await start();
  return {
    host: prepared.host,
    port,
    version: prepared.version,
    bin: prepared.bin,
    get pid() {
      return child?.pid;
    },
    url: (name) => databaseUrl(target, name),
    createDatabase: async (name) => {
      await ensureDatabase(target, name);
      return databaseUrl(target, name);
    },
    start,
    stop: () => signal('SIGINT'),
    kill: () => signal('SIGKILL'),
    close: async (removeData = false) => {
      await signal('SIGINT');
      if (removeData) rmSync(o.dir, { recursive: true, force: true });
    },
  };
}
