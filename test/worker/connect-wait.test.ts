/**
 * A process that starts while the Temporal server is away (restarting, or not up yet) waits for it
 * (TEMPORAL_CONNECT_WAIT_MS) instead of exiting: its supervisor counted every refused start as a crash, and the CI
 * soak's cluster gave up on a worker killed twice around a Temporal restart. The real API process (src/api-main.ts),
 * whose Temporal address is a port nothing listens on until a proxy to the run's dev server opens there 3 s later.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import net from 'node:net';
import path from 'node:path';
import { eventually } from '../helpers/eventually';
import { closedPort, refusedPort } from '../helpers/net';
import { DEV_SERVER_ADDRESS_ENV } from '../helpers/servers';

const ROOT = path.resolve(__dirname, '../..');

interface ApiProcess {
  readonly child: ChildProcess;
  readonly exited: Promise<number | null>;
  output(): string;
}

async function spawnApi(temporalPort: number, env: NodeJS.ProcessEnv): Promise<{ api: ApiProcess; port: number }> {
  const port = await closedPort();
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/api-main.ts'], {
    cwd: ROOT,
    env: {
      ...process.env,
      TEMPORAL_ADDRESS: `127.0.0.1:${temporalPort}`,
      PORT: String(port),
      LOG_LEVEL: 'info',
      TASK_QUEUE: `connect-wait-${Math.random().toString(36).slice(2)}`,
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout?.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr?.on('data', (c: Buffer) => (out += c.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { api: { child, exited, output: () => out }, port };
}

/** A TCP proxy on `port` to the dev server: the Temporal server "coming back" on the address the process was given. */
async function proxyToDevServer(port: number): Promise<net.Server> {
  const [host, target] = (process.env[DEV_SERVER_ADDRESS_ENV] ?? '').split(':');
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(target), host);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('error', () => undefined);
      s.on('close', () => sockets.delete(s));
    }
    client.pipe(upstream).pipe(client);
  });
  server.on('close', () => sockets.forEach((s) => s.destroy()));
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  (server as net.Server & { sockets?: Set<net.Socket> }).sockets = sockets;
  return server;
}

const closeProxy = (server: net.Server): Promise<void> => {
  for (const s of (server as net.Server & { sockets?: Set<net.Socket> }).sockets ?? []) s.destroy();
  return new Promise((resolve) => server.close(() => resolve()));
};

// The two processes are independent (each its own closed port): the tests run side by side, most of each being the
// process's own start.
describe('a process started while Temporal is away', () => {
  const running: ApiProcess[] = [];
  afterAll(async () => {
    for (const p of running.splice(0)) {
      if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill('SIGKILL');
      await p.exited;
    }
  });

  it.concurrent(
    'waits for the server and serves once it is reachable (no exit, nothing for a supervisor to count)',
    async () => {
      const temporalPort = await closedPort();
      const { api, port } = await spawnApi(temporalPort, { TEMPORAL_CONNECT_WAIT_MS: '60000' });
      running.push(api);
      // The process is refused for a while: it logs the wait and stays up.
      await eventually('the wait logged', () => /Temporal server not reachable; retrying/.test(api.output()), 30_000);
      await new Promise((resolve) => setTimeout(resolve, 3_000));
      expect(api.child.exitCode).toBeNull();
      const proxy = await proxyToDevServer(temporalPort);
      try {
        await eventually(
          'the API serving',
          async () =>
            (
              await fetch(`http://127.0.0.1:${port}/healthz`, { signal: AbortSignal.timeout(2_000) }).catch(
                () => undefined,
              )
            )?.ok === true,
          30_000,
        );
        expect(api.output()).toMatch(/Temporal server reachable/);
        expect(api.child.exitCode).toBeNull();
      } finally {
        api.child.kill('SIGTERM');
        await api.exited;
        await closeProxy(proxy);
      }
    },
    90_000,
  );

  it.concurrent(
    'gives up with exit 1 once TEMPORAL_CONNECT_WAIT_MS has passed',
    async () => {
      const { api } = await spawnApi(await refusedPort(), { TEMPORAL_CONNECT_WAIT_MS: '1500' });
      running.push(api);
      const code = await Promise.race([
        api.exited,
        new Promise<'still running'>((resolve) => setTimeout(() => resolve('still running'), 45_000)),
      ]);
      expect(code).toBe(1);
    },
    60_000,
  );
});
