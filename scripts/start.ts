/**
 * `npm start`: the whole local stack on one machine.
 *   - the Temporal dev server (embedded SQLite under .temporal/, so state survives a restart; env TEMPORAL_DB_FILE
 *     names another file) with its web UI,
 *     the payment search attributes registered;
 *   - PostgreSQL for wallets and key records (data beside the SQLite file; the machine's binaries or the npm package's;
 *     DATABASE_URL names one of your own instead), supervised like the rest;
 *   - the provider simulator (its state in a JSON file beside the SQLite file, so provider and Temporal state stay
 *     consistent across restarts), the worker and the payments API as supervised child processes: one that crashes
 *     is restarted with a backoff and a log line; only repeated crashes (5 within a minute) stop the stack.
 * Ctrl-C stops everything: the API, worker and simulator (own process groups) drain, then the dev server is torn
 * down (it shares the terminal's process group, so it may already have received the Ctrl-C itself).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { type Config, loadConfig } from '../src/config';
import { startDevServer } from './lib/dev-server';
import { startLocalDatabase } from './lib/payments-database';
import { type ServiceStatus, Supervisor } from './lib/supervisor';
import { DEFAULT_CACHE_DIR, PROJECT_ROOT } from './lib/temporal-binaries';

const HOST = '127.0.0.1';
const temporalPort = Number(process.env.TEMPORAL_PORT ?? 7233);
const uiPort = Number(process.env.TEMPORAL_UI_PORT ?? 8233);
const simulatorPort = Number(process.env.SIMULATOR_PORT ?? 4010);
const apiPort = Number(process.env.PORT ?? 3000);
/** The worker's metrics (ours, then the SDK runtime's): `host:port` or `off`, as src/config.ts reads them. */
const workerMetricsAddress = process.env.WORKER_METRICS_ADDRESS ?? `${HOST}:9465`;
const sdkMetricsAddress = process.env.SDK_METRICS_ADDRESS ?? `${HOST}:9464`;
const portOf = (address: string) =>
  address === 'off' ? undefined : Number(address.slice(address.lastIndexOf(':') + 1));

interface Component {
  readonly name: string;
  readonly entry: string;
  readonly port?: number;
  /** A URL that answers 2xx once the component is ready. */
  readonly ready?: string;
  /** An output line that says it is ready. */
  readonly readyLine?: RegExp;
}

// In start order: the simulator must be configured before the worker calls it, the API comes last (stopped first).
const components: Component[] = [
  {
    name: 'simulator',
    entry: 'src/simulator/main.ts',
    port: simulatorPort,
    ready: `http://${HOST}:${simulatorPort}/_sim/health`,
  },
  // The worker serves its metrics once its workers exist: the first answer means ready (else its log line does).
  {
    name: 'worker',
    entry: 'src/worker.ts',
    readyLine: /"msg":"worker running"/,
    ...(workerMetricsAddress === 'off'
      ? {}
      : { port: portOf(workerMetricsAddress), ready: `http://${workerMetricsAddress}/metrics` }),
  },
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

/** Whether a process at `level` writes info lines. */
const logsInfo = (level: string): boolean => ['info', 'debug', 'trace'].includes(level);

/** Whether `url` answers 2xx within a second. */
async function isUp(url: string): Promise<boolean> {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(1_000) });
    return res.ok;
  } catch {
    return false;
  }
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
  const sdkMetricsPort = portOf(sdkMetricsAddress);
  if (sdkMetricsPort) await assertPortFree(sdkMetricsPort, 'worker SDK metrics');

  // TEMPORAL_DB_FILE: another SQLite file for the dev server's state (e.g. a test's temp dir).
  const dbFilename = process.env.TEMPORAL_DB_FILE
    ? path.resolve(process.env.TEMPORAL_DB_FILE)
    : path.join(DEFAULT_CACHE_DIR, 'dev-server.sqlite');
  mkdirSync(path.dirname(dbFilename), { recursive: true });
  const shownDb = dbFilename.startsWith(PROJECT_ROOT + path.sep) ? path.relative(PROJECT_ROOT, dbFilename) : dbFilename;
  const [operatorForUi] = config.OPERATOR_TOKENS;
  const codecEndpoint = operatorForUi
    ? `http://${HOST}:${apiPort}/codec/operator/${encodeURIComponent(operatorForUi.token)}`
    : undefined;
  log(`Starting the Temporal dev server (state in ${shownDb})...`);
  const started = Date.now();
  const temporal = await startDevServer({
    ip: HOST,
    port: temporalPort,
    ui: true,
    uiPort,
    dbFilename,
    log: { format: 'pretty', level: 'warn' },
    // The web UI decodes payloads through the API's codec endpoint (it cannot send our bearer token: path token).
    ...(codecEndpoint ? { extraArgs: ['--ui-codec-endpoint', codecEndpoint] } : {}),
  });
  log(`Temporal dev server up in ${((Date.now() - started) / 1000).toFixed(1)} s`);

  // The simulator's state lives beside the dev server's, so a restart of `npm start` finds both (delete both for a
  // clean slate); SIMULATOR_STATE_PATH names another file.
  const stateBase = dbFilename.replace(/\.sqlite$/, '');
  const simulatorState = process.env.SIMULATOR_STATE_PATH
    ? path.resolve(process.env.SIMULATOR_STATE_PATH)
    : `${stateBase}.simulator.json`;
  /** Pids and addresses of the running stack, for tools that act on it (`npm run soak -- --dev`). */
  const stackFile = `${stateBase}.stack.json`;
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    TEMPORAL_ADDRESS: `${HOST}:${temporalPort}`,
    // Set once PostgreSQL is up (below).
    DATABASE_URL: process.env.DATABASE_URL,
    TEMPORAL_NAMESPACE: 'default',
    SIMULATOR_PORT: String(simulatorPort),
    SIMULATOR_URL: process.env.SIMULATOR_URL ?? `http://${HOST}:${simulatorPort}`,
    SIMULATOR_STATE_PATH: simulatorState,
    PORT: String(apiPort),
    // Quiet by default: each component's warnings and errors, and one "ready" line from here.
    LOG_LEVEL: process.env.LOG_LEVEL ?? 'warn',
    WORKER_METRICS_ADDRESS: workerMetricsAddress,
    SDK_METRICS_ADDRESS: sdkMetricsAddress,
    CODEC_CORS_ORIGINS: process.env.CODEC_CORS_ORIGINS ?? `http://${HOST}:${uiPort},http://localhost:${uiPort}`,
  };
  let stopping = false;
  const writeStack = (services: ServiceStatus[]) => {
    if (stopping) return;
    const stack = {
      kind: 'dev',
      temporalAddress: `${HOST}:${temporalPort}`,
      namespace: 'default',
      taskQueue: config.TASK_QUEUE,
      simulatorUrl: env.SIMULATOR_URL,
      databaseUrl: env.DATABASE_URL,
      apiUrls: [`http://${HOST}:${apiPort}`],
      webUi: `http://${HOST}:${uiPort}`,
      startPid: process.pid,
      services: Object.fromEntries(services.map((s) => [s.name, { pid: s.pid, state: s.state, restarts: s.restarts }])),
    };
    try {
      writeFileSync(stackFile, JSON.stringify(stack, null, 2));
    } catch {
      // informational only
    }
  };
  const supervisor = new Supervisor({
    log,
    onGiveUp: () => void stop(1),
    onChange: writeStack,
  });
  const stop = async (code: number) => {
    if (stopping) return;
    stopping = true;
    log('Stopping: API, worker and simulator drain first, then PostgreSQL and the Temporal dev server...');
    await supervisor.stop();
    await temporal.teardown();
    log('Stopped.');
    process.exit(code);
  };
  // `on`, not `once`: Ctrl-C reaches this process twice under `npm start` (once from the terminal's process group, once
  // relayed by the tsx CLI when our acknowledgement is late); `stop` is idempotent, and a second, unhandled SIGINT
  // would kill this process mid-drain: no SIGKILL backstop for a child that hangs, no teardown, exit 130.
  process.on('SIGINT', () => void stop(0));
  process.on('SIGTERM', () => void stop(0));
  let database: { url: string; own?: string } | undefined;
  try {
    // PostgreSQL first (tier -1: stopped last), so the worker and the API migrate and use it from their start.
    database = await startLocalDatabase({ supervisor, dir: `${stateBase}.postgres`, tier: -1, log });
    env.DATABASE_URL = database.url;
    log(`PostgreSQL ready (${database.own ?? 'DATABASE_URL'})`);
    for (const [tier, c] of components.entries()) {
      const ready = c.ready;
      await supervisor.start({
        name: c.name,
        command: process.execPath,
        args: ['--import', 'tsx', path.join(PROJECT_ROOT, c.entry)],
        cwd: PROJECT_ROOT,
        env,
        tier,
        ...(ready === undefined ? {} : { ready: () => isUp(ready) }),
        // Its "worker running" line is logged at info: below that level it is taken as ready once spawned.
        // Only where no URL tells (metrics off), and only when the children log at info at all.
        ...(c.readyLine === undefined || ready !== undefined || !logsInfo(env.LOG_LEVEL ?? 'info')
          ? {}
          : { readyLine: c.readyLine }),
        // Idempotent, and the simulator keeps it in its state; after a restart it is set again all the same.
        ...(c.name === 'simulator' ? { afterReady: () => configureSimulatorMerchant(config) } : {}),
      });
      log(`${c.name} ready${c.ready ? ` (${c.ready})` : ''}`);
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
  log(`Provider simulator:    http://${HOST}:${simulatorPort}  (state in ${simulatorState})`);
  if (database?.own)
    log(`PostgreSQL (wallets):  ${database.url}  (data in ${shownDb.replace(/\.sqlite$/, '')}.postgres)`);
  log(`Payments API:          http://${HOST}:${apiPort}  (OpenAPI: http://${HOST}:${apiPort}/openapi.json)`);
  log(
    `Metrics:               http://${HOST}:${apiPort}/metrics (API), ` +
      `${workerMetricsAddress === 'off' ? 'off' : `http://${workerMetricsAddress}/metrics`} (worker), ` +
      `${sdkMetricsAddress === 'off' ? 'off' : `http://${sdkMetricsAddress}/metrics`} (Temporal SDK)`,
  );
  if (codecEndpoint)
    log(`Codec endpoint:        http://${HOST}:${apiPort}/codec (the web UI decodes payloads with it)`);
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
