/**
 * `npm start`: the whole local stack on one machine.
 *   - the Temporal dev server (embedded SQLite under .temporal/, so state survives a restart; env TEMPORAL_DB_FILE
 *     names another file) with its web UI,
 *     the payment search attributes registered;
 *   - PostgreSQL for wallets and key records (data beside the SQLite file; the machine's binaries or the npm package's;
 *     DATABASE_URL names one of your own instead), supervised like the rest;
 *   - the provider simulator (its state in a JSON file beside the SQLite file, so provider and Temporal state stay
 *     consistent across restarts), the worker and the payments API.
 * Every one is a supervised child process (scripts/lib/supervisor.ts): one that crashes is restarted with a backoff
 * and a log line; only repeated crashes (5 within a minute) stop the stack. Each dies with this process, however it
 * dies (SIGKILL included), and a start that finds what an earlier one left stops it first (scripts/lib/stale-stack.ts).
 * The console keeps this script's own lines; every component's output goes to its log file beside the state
 * (`.temporal/dev-server.logs/<component>.log`), and the last lines of one that crashes are shown.
 * Ctrl-C, SIGTERM or SIGHUP (a closed terminal) stop everything: the API, worker and simulator drain, then the dev
 * server stops.
 */
import { existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { type Config, loadConfig } from '../src/config';
import { devServerArgs } from './lib/dev-server';
import { LogFiles } from './lib/log-files';
import { type StackPort, assertPortsFree } from './lib/ports';
import { isUp, temporalServing } from './lib/readiness';
import { describeReclaim, reclaimStaleStack, recordStack } from './lib/stale-stack';
import { onStopSignals } from './lib/stop-signals';
import { startLocalDatabase } from './lib/payments-database';
import { type ServiceStatus, Supervisor } from './lib/supervisor';
import { DEFAULT_CACHE_DIR, PROJECT_ROOT, TEMPORAL_CLI, resolveBinary } from './lib/temporal-binaries';

const HOST = '127.0.0.1';
const temporalPort = Number(process.env.TEMPORAL_PORT ?? 7233);
const uiPort = Number(process.env.TEMPORAL_UI_PORT ?? 8233);
const simulatorPort = Number(process.env.SIMULATOR_PORT ?? 4010);
const apiPort = Number(process.env.PORT ?? 3000);
/** The worker's metrics (ours, then the SDK runtime's): `host:port` or `off`, as src/config/ reads them. */
const workerMetricsAddress = process.env.WORKER_METRICS_ADDRESS ?? `${HOST}:9465`;
const sdkMetricsAddress = process.env.SDK_METRICS_ADDRESS ?? `${HOST}:9464`;
const portOf = (address: string) =>
  address === 'off' ? undefined : Number(address.slice(address.lastIndexOf(':') + 1));

interface Component {
  readonly name: string;
  readonly entry: string;
  readonly port?: number;
  /** What `port` is and how to move it elsewhere, for the message when it is taken. */
  readonly purpose?: string;
  readonly change?: string;
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
    change: 'set SIMULATOR_PORT to another port',
    ready: `http://${HOST}:${simulatorPort}/_sim/health`,
  },
  // The worker serves its metrics once its workers exist: the first answer means ready (else its log line does).
  {
    name: 'worker',
    entry: 'src/worker.ts',
    readyLine: /"msg":"worker running"/,
    ...(workerMetricsAddress === 'off'
      ? {}
      : {
          port: portOf(workerMetricsAddress),
          purpose: 'worker metrics',
          change: 'set WORKER_METRICS_ADDRESS to another host:port (or off)',
          ready: `http://${workerMetricsAddress}/metrics`,
        }),
  },
  {
    name: 'api',
    entry: 'src/api-main.ts',
    port: apiPort,
    purpose: 'payments API',
    change: 'set PORT to another port',
    ready: `http://${HOST}:${apiPort}/healthz`,
  },
];

/** This script's own lines: the console, and the supervisor's log file once it is open. */
let logToFile: ((line: string) => void) | undefined;
function log(line: string) {
  process.stdout.write(`[start] ${line}\n`);
  logToFile?.(`${new Date().toISOString()} ${line}`);
}

/** Every port the stack binds, with the variable that moves it. */
function stackPorts(): StackPort[] {
  const sdkMetricsPort = portOf(sdkMetricsAddress);
  return [
    { port: temporalPort, purpose: 'Temporal frontend', change: 'set TEMPORAL_PORT to another port' },
    { port: uiPort, purpose: 'Temporal web UI', change: 'set TEMPORAL_UI_PORT to another port' },
    ...components.flatMap((c) =>
      c.port ? [{ port: c.port, purpose: c.purpose ?? c.name, change: c.change ?? 'choose another port' }] : [],
    ),
    ...(sdkMetricsPort
      ? [
          {
            port: sdkMetricsPort,
            purpose: 'worker SDK metrics',
            change: 'set SDK_METRICS_ADDRESS to another host:port (or off)',
          },
        ]
      : []),
  ];
}

/** The provisioned Temporal CLI as a file (the dev server, and the runbook's commands). */
async function temporalCli(): Promise<string> {
  const cli = await resolveBinary(TEMPORAL_CLI, { log });
  if (cli.executable.type !== 'existing-path') {
    throw new Error(`the Temporal CLI is needed as a file (set TEMPORAL_CLI_PATH); tried: ${cli.tried.join('; ')}`);
  }
  return cli.executable.path;
}

/** Whether a process at `level` writes info lines. */
const logsInfo = (level: string): boolean => ['info', 'debug', 'trace'].includes(level);

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

/**
 * Where `npm start` keeps its state: the dev server's SQLite file (TEMPORAL_DB_FILE, e.g. a test's temp dir) and,
 * beside it, the simulator's (SIMULATOR_STATE_PATH names another), the stack file and the logs, so a restart finds
 * them together (delete the SQLite and simulator files for a clean slate).
 */
function statePaths(): { dbFilename: string; simulatorState: string; stackFile: string; logsDir: string } {
  const dbFilename = process.env.TEMPORAL_DB_FILE
    ? path.resolve(process.env.TEMPORAL_DB_FILE)
    : path.join(DEFAULT_CACHE_DIR, 'dev-server.sqlite');
  mkdirSync(path.dirname(dbFilename), { recursive: true });
  const stateBase = dbFilename.replace(/\.sqlite$/, '');
  return {
    dbFilename,
    simulatorState: process.env.SIMULATOR_STATE_PATH
      ? path.resolve(process.env.SIMULATOR_STATE_PATH)
      : `${stateBase}.simulator.json`,
    // Pids and addresses of the running stack, for tools that act on it (`npm run soak -- --dev`) and the next start.
    stackFile: `${stateBase}.stack.json`,
    logsDir: `${stateBase}.logs`,
  };
}

async function main() {
  const config = loadConfig({
    ...process.env,
    SIMULATOR_URL: process.env.SIMULATOR_URL ?? `http://${HOST}:${simulatorPort}`,
  });

  const { dbFilename, simulatorState, stackFile, logsDir } = statePaths();
  const shown = (p: string) => (p.startsWith(PROJECT_ROOT + path.sep) ? path.relative(PROJECT_ROOT, p) : p);
  const shownDb = shown(dbFilename);
  const logs = new LogFiles(logsDir);
  const supervisorLog = logs.writer('start');
  logToFile = supervisorLog;

  let stopping = false;
  let stop: (code: number) => Promise<void> = async (code) => {
    stopping = true;
    process.exit(code);
  };
  onStopSignals(() => void stop(0));

  // What an earlier `npm start` on this state left running (its supervisor killed) is stopped first; a supervisor
  // still running is another `npm start` on this state, and this one refuses.
  const reclaimed = await reclaimStaleStack(stackFile, { what: 'npm start' });
  for (const line of describeReclaim(reclaimed, 'npm start')) log(line);
  // Ports the stopped processes held may be released a moment after they are gone.
  await assertPortsFree(stackPorts(), undefined, { waitMs: reclaimed.stopped.length > 0 ? 5_000 : 0 });
  const cli = await temporalCli();

  // The web UI decodes payloads through the API's codec endpoint. Its browser sends no credential of ours (the dev
  // server has no setting for one, and none belongs in a URL, an argument list or a log line): the API lets the UI's own
  // origins decode without a token (CODEC_TRUSTED_ORIGINS, development only) and nothing else, so what the UI holds can
  // neither resolve a review nor move money (docs/operations.md, "Encrypted payloads and the codec endpoint").
  const uiOrigins = [`http://${HOST}:${uiPort}`, `http://localhost:${uiPort}`].join(',');
  const codecEndpoint = `http://${HOST}:${apiPort}/codec`;
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
    // Into the log files: the console shows this script's lines only.
    LOG_LEVEL: process.env.LOG_LEVEL ?? 'info',
    WORKER_METRICS_ADDRESS: workerMetricsAddress,
    SDK_METRICS_ADDRESS: sdkMetricsAddress,
    CODEC_CORS_ORIGINS: process.env.CODEC_CORS_ORIGINS ?? uiOrigins,
    CODEC_TRUSTED_ORIGINS: process.env.CODEC_TRUSTED_ORIGINS ?? uiOrigins,
  };
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
      logs: logs.dir,
      ...recordStack(services),
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
  stop = async (code: number) => {
    if (stopping) return;
    stopping = true;
    log('Stopping: API, worker and simulator drain first, then PostgreSQL and the Temporal dev server...');
    await supervisor.stop();
    // Nothing left to find: the next start has no stale stack to check.
    if (existsSync(stackFile)) rmSync(stackFile, { force: true });
    log('Stopped.');
    await logs.close();
    process.exit(code);
  };
  let database: { url: string; own?: string } | undefined;
  try {
    log(`Starting the Temporal dev server (state in ${shownDb})...`);
    const started = Date.now();
    await supervisor.start({
      name: 'temporal',
      command: cli,
      args: devServerArgs({
        ip: HOST,
        port: temporalPort,
        uiPort,
        dbFilename,
        logLevel: 'warn',
        // The web UI decodes payloads through the API's codec endpoint, with no token (see codecEndpoint above).
        extraArgs: ['--ui-codec-endpoint', codecEndpoint],
      }),
      cwd: PROJECT_ROOT,
      tier: 0,
      ready: () => temporalServing(`${HOST}:${temporalPort}`),
      readyTimeoutMs: 120_000,
      output: logs.writer('temporal'),
      lastLines: () => logs.lastLines('temporal'),
    });
    log(`Temporal dev server up in ${((Date.now() - started) / 1000).toFixed(1)} s`);
    // PostgreSQL before the worker and the API (tier -1: stopped last), so they migrate and use it from their start.
    database = await startLocalDatabase({
      supervisor,
      dir: dbFilename.replace(/\.sqlite$/, '.postgres'),
      tier: -1,
      log,
    });
    env.DATABASE_URL = database.url;
    log(`PostgreSQL ready (${database.own ?? 'DATABASE_URL'})`);
    for (const [i, c] of components.entries()) {
      const ready = c.ready;
      await supervisor.start({
        name: c.name,
        command: process.execPath,
        args: ['--import', 'tsx', path.join(PROJECT_ROOT, c.entry)],
        cwd: PROJECT_ROOT,
        env,
        tier: i + 1,
        ...(ready === undefined ? {} : { ready: () => isUp(ready) }),
        // Its "worker running" line is logged at info: below that level it is taken as ready once spawned.
        // Only where no URL tells (metrics off), and only when the children log at info at all.
        ...(c.readyLine === undefined || ready !== undefined || !logsInfo(env.LOG_LEVEL ?? 'info')
          ? {}
          : { readyLine: c.readyLine }),
        // Idempotent, and the simulator keeps it in its state; after a restart it is set again all the same.
        ...(c.name === 'simulator' ? { afterReady: () => configureSimulatorMerchant(config) } : {}),
        output: logs.writer(c.name),
        lastLines: () => logs.lastLines(c.name),
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
  log(`Codec endpoint:        ${codecEndpoint} (the web UI decodes payloads with it, no token: its origin)`);
  if (token) {
    log(`Dev token (merchant ${token.merchantId}): ${token.token}`);
    log('First payment:');
    log(
      `  curl -s -X POST http://${HOST}:${apiPort}/v1/payments -H 'Authorization: Bearer ${token.token}' ` +
        `-H 'Idempotency-Key: demo-1' -H 'Content-Type: application/json' ` +
        `-d '{"orderId":"order-1","amount":{"value":1000,"currency":"EUR"},"paymentMethod":"pm_card_visa"}'`,
    );
    if (database && config.MERCHANT_WEBHOOKS) {
      log('Webhooks to your receiver (every status change and refund, signed with Payments-Signature):');
      log(
        `  curl -s -X PUT http://${HOST}:${apiPort}/v1/webhook-endpoint -H 'Authorization: Bearer ${token.token}' ` +
          `-H 'Content-Type: application/json' -d '{"url":"http://127.0.0.1:8080/hooks"}'`,
      );
      log("  (your receiver's URL; it answers the whsec_ secret that signs the events; npm run demo runs one)");
    }
  }
  if (operator) {
    log(`Dev operator token (operator ${operator.operatorId}, resolves reviews only): ${operator.token}`);
  }
  log(`Logs:                  ${shown(logs.dir)}/ (temporal, simulator, worker, api, start)`);
  log(`Temporal CLI:          ${shown(cli)} (not on the PATH; or: npm run temporal -- workflow list)`);
  log('Walk the interesting paths: npm run demo');
  log('Press Ctrl-C to stop.');
}

main().catch((err: unknown) => {
  console.error(`[start] ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
});
