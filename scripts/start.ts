/**
 * `npm start`: the whole local stack on one machine.
 *   - the Temporal dev server (embedded SQLite under .temporal/, so state survives a restart; env TEMPORAL_DB_FILE
 *     names another file) with its web UI,
 *     the payment search attributes registered;
 *   - the provider simulator, the worker and the payments API as child processes.
 * Ctrl-C stops everything: the simulator, worker and API (own process groups) drain, then the dev server is torn
 * down (it shares the terminal's process group, so it may already have received the Ctrl-C itself).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { type Config, loadConfig } from '../src/config';
import { startDevServer } from './lib/dev-server';
import { DEFAULT_CACHE_DIR, PROJECT_ROOT } from './lib/temporal-binaries';

const HOST = '127.0.0.1';
const temporalPort = Number(process.env.TEMPORAL_PORT ?? 7233);
const uiPort = Number(process.env.TEMPORAL_UI_PORT ?? 8233);
const simulatorPort = Number(process.env.SIMULATOR_PORT ?? 4010);
const apiPort = Number(process.env.PORT ?? 3000);

interface Component {
  readonly name: string;
  readonly entry: string;
  readonly port?: number;
  /** A URL that answers 2xx once the component is ready. */
  readonly ready?: string;
}

// In start order: the simulator must be configured before the worker calls it, the API comes last.
const components: Component[] = [
  {
    name: 'simulator',
    entry: 'src/simulator/main.ts',
    port: simulatorPort,
    ready: `http://${HOST}:${simulatorPort}/_sim/health`,
  },
  { name: 'worker', entry: 'src/worker.ts' },
  { name: 'api', entry: 'src/api/main.ts', port: apiPort, ready: `http://${HOST}:${apiPort}/healthz` },
];

function log(line: string) {
  process.stdout.write(`[start] ${line}\n`);
}

/** Resolves when `port` can be bound on 127.0.0.1, rejects with a message naming who needs it when it cannot. */
function assertPortFree(port: number, purpose: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const probe = net.createServer();
    probe.once('error', (err: NodeJS.ErrnoException) => {
      reject(
        new Error(
          err.code === 'EADDRINUSE'
            ? `Port ${port} (${purpose}) is already in use on ${HOST}. Is another \`npm start\` running? ` +
                `Stop it, or choose another port through the environment.`
            : `Cannot bind ${HOST}:${port} (${purpose}): ${err.message}`,
        ),
      );
    });
    probe.listen(port, HOST, () => probe.close(() => resolve()));
  });
}

function spawnComponent(c: Component, env: NodeJS.ProcessEnv): ChildProcess {
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(PROJECT_ROOT, c.entry)], {
    cwd: PROJECT_ROOT,
    env,
    // Own process group: Ctrl-C reaches only this script, which then stops children in order.
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const prefix = (chunk: Buffer) =>
    chunk
      .toString()
      .split('\n')
      .filter(Boolean)
      .map((l) => `[${c.name}] ${l}\n`)
      .join('');
  child.stdout?.on('data', (d: Buffer) => process.stdout.write(prefix(d)));
  child.stderr?.on('data', (d: Buffer) => process.stderr.write(prefix(d)));
  return child;
}

function stopChild(child: ChildProcess, timeoutMs: number): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
    child.kill('SIGTERM');
  });
}

/** Polls `url` until it answers 2xx (bounded), or fails naming the component. */
async function waitReady(name: string, url: string, child: ChildProcess, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`${name} exited with code ${child.exitCode} while starting`);
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(1_000) });
      if (res.ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`${name} was not ready at ${url} within ${timeoutMs / 1000} s`);
}

/** Points the simulator's merchant (our provider api key) at the API's webhook endpoint, signed with our secret. */
async function configureSimulatorMerchant(config: Config): Promise<void> {
  const res = await fetch(
    `http://${HOST}:${simulatorPort}/_sim/merchants/${encodeURIComponent(config.PROVIDER_API_KEY)}`,
    {
      method: 'PUT',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        idempotency: config.PROVIDER_IDEMPOTENCY,
        key_ttl_s: config.PROVIDER_KEY_TTL_S,
        webhook_url: `http://${HOST}:${apiPort}/webhooks/simulator`,
        webhook_secret: config.WEBHOOK_SECRET,
      }),
    },
  );
  if (!res.ok) throw new Error(`configuring the simulator merchant failed: ${res.status} ${await res.text()}`);
}

async function main() {
  const config = loadConfig({
    ...process.env,
    SIMULATOR_URL: process.env.SIMULATOR_URL ?? `http://${HOST}:${simulatorPort}`,
  });
  await assertPortFree(temporalPort, 'Temporal frontend');
  await assertPortFree(uiPort, 'Temporal web UI');
  for (const c of components) if (c.port) await assertPortFree(c.port, c.name);

  // TEMPORAL_DB_FILE: another SQLite file for the dev server's state (e.g. a test's temp dir).
  const dbFilename = process.env.TEMPORAL_DB_FILE
    ? path.resolve(process.env.TEMPORAL_DB_FILE)
    : path.join(DEFAULT_CACHE_DIR, 'dev-server.sqlite');
  mkdirSync(path.dirname(dbFilename), { recursive: true });
  const shownDb = dbFilename.startsWith(PROJECT_ROOT + path.sep) ? path.relative(PROJECT_ROOT, dbFilename) : dbFilename;
  log(`Starting the Temporal dev server (state in ${shownDb})...`);
  const started = Date.now();
  const temporal = await startDevServer({
    ip: HOST,
    port: temporalPort,
    ui: true,
    uiPort,
    dbFilename,
    log: { format: 'pretty', level: 'warn' },
  });
  log(`Temporal dev server up in ${((Date.now() - started) / 1000).toFixed(1)} s`);

  const env: NodeJS.ProcessEnv = {
    ...process.env,
    TEMPORAL_ADDRESS: `${HOST}:${temporalPort}`,
    TEMPORAL_NAMESPACE: 'default',
    SIMULATOR_PORT: String(simulatorPort),
    SIMULATOR_URL: process.env.SIMULATOR_URL ?? `http://${HOST}:${simulatorPort}`,
    PORT: String(apiPort),
  };
  const children: { c: Component; child: ChildProcess }[] = [];
  let stopping = false;
  const stop = async (code: number) => {
    if (stopping) return;
    stopping = true;
    log('Stopping: worker, simulator and API drain first, then the Temporal dev server...');
    await Promise.all(children.map(({ child }) => stopChild(child, 15_000)));
    await temporal.teardown();
    log('Stopped.');
    process.exit(code);
  };
  // `on`, not `once`: Ctrl-C reaches this process twice under `npm start` (once from the terminal's process group, once
  // relayed by the tsx CLI when our acknowledgement is late); `stop` is idempotent, and a second, unhandled SIGINT
  // would kill this process mid-drain: no SIGKILL backstop for a child that hangs, no teardown, exit 130.
  process.on('SIGINT', () => void stop(0));
  process.on('SIGTERM', () => void stop(0));
  try {
    for (const c of components) {
      const child = spawnComponent(c, env);
      children.push({ c, child });
      child.once('exit', (code, signal) => {
        if (stopping) return;
        log(`${c.name} exited unexpectedly (${signal ?? `code ${code}`}); stopping the stack.`);
        void stop(1);
      });
      if (c.ready) await waitReady(c.name, c.ready, child);
      if (c.name === 'simulator') await configureSimulatorMerchant(config);
    }
  } catch (err) {
    // Never leave a half-started stack behind: whatever did start is stopped again.
    log(err instanceof Error ? err.message : String(err));
    await stop(1);
  }
  const [token] = config.API_TOKENS;
  const [operator] = config.OPERATOR_TOKENS;

  log('');
  log(`Temporal web UI:       http://${HOST}:${uiPort}`);
  log(`Temporal frontend:     ${HOST}:${temporalPort} (namespace default)`);
  log(`Provider simulator:    http://${HOST}:${simulatorPort}`);
  log(`Payments API:          http://${HOST}:${apiPort}  (OpenAPI: http://${HOST}:${apiPort}/openapi.json)`);
  if (token) {
    log(`Dev token (merchant ${token.merchantId}): ${token.token}`);
    log('First payment:');
    log(
      `  curl -s -X POST http://${HOST}:${apiPort}/v1/payments -H 'Authorization: Bearer ${token.token}' ` +
        `-H 'Idempotency-Key: demo-1' -H 'Content-Type: application/json' ` +
        `-d '{"orderId":"order-1","amount":{"value":1000,"currency":"EUR"},"paymentMethod":"pm_card_visa"}'`,
    );
  }
  if (operator) {
    log(`Dev operator token (operator ${operator.operatorId}, resolves reviews only): ${operator.token}`);
  }
  log('Walk the interesting paths: npm run demo');
  log('Press Ctrl-C to stop.');
}

main().catch((err: unknown) => {
  console.error(`[start] ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
});
