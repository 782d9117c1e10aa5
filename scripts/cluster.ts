/**
 * `npm run cluster`: the production-shaped stack on this machine, without Docker.
 *   - PostgreSQL 15 from the machine (persistence and visibility), data under `.temporal/cluster/postgres/`;
 *   - the real Temporal server (built once with `go install`, see scripts/lib/temporal-server.ts), all services in one
 *     process, 4 history shards, schemas set up with Temporal's own sql tool; namespace `default` and the four payment
 *     search attributes registered with the provisioned Temporal CLI;
 *   - the Temporal web UI (`ui-server`, built once the same way) pointed at it;
 *   - Redis (issue 9's shared breaker store; `startRedisServer` from scripts/lib/redis-server.ts);
 *   - the provider simulator (state in `.temporal/cluster/simulator.json`), three worker processes, two API processes.
 * Every process is supervised: one that exits is restarted with a backoff and a log line (5 crashes within a minute
 * stop the stack). Component logs go to `.temporal/cluster/logs/`; pids and addresses to `.temporal/cluster/stack.json`
 * (read by `npm run soak`). Ctrl-C stops everything, APIs first, PostgreSQL last.
 *
 * Ports: fixed defaults (frontend 17233, web UI 18233, APIs 13000 and 13001, ...), all shifted by CLUSTER_PORT_OFFSET.
 * CLUSTER_DIR names another state directory; delete it for a clean slate.
 */
import { execFile } from 'node:child_process';
import { type WriteStream, createWriteStream, existsSync, mkdirSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { promisify } from 'node:util';
import { Connection } from '@temporalio/client';
import { bundleWorkflowCode } from '@temporalio/worker';
import { loadConfig } from '../src/config';
import { paymentSearchAttributes } from '../src/domain/search-attributes';
import { CrashPolicy } from './lib/crash-policy';
import { preparePostgres } from './lib/postgres';
import { ensurePaymentsDatabase } from './lib/payments-database';
import { type RunningRedis, startRedisServer } from './lib/redis-server';
import { type ServiceStatus, Supervisor } from './lib/supervisor';
import { DEFAULT_CACHE_DIR, PROJECT_ROOT, TEMPORAL_CLI, resolveBinary } from './lib/temporal-binaries';
import { ensureTemporalServer, ensureUiServer, writeServerConfig, writeUiConfig } from './lib/temporal-server';

const execFileAsync = promisify(execFile);
const HOST = '127.0.0.1';
const NAMESPACE = 'default';
const WORKERS = 3;
const APIS = 2;
const NUM_HISTORY_SHARDS = 4;

const offset = Number(process.env.CLUSTER_PORT_OFFSET ?? 0);
const port = (base: number) => base + offset;
const ports = {
  postgres: port(15432),
  temporal: {
    frontend: port(17233),
    frontendHttp: port(17243),
    history: port(17234),
    matching: port(17235),
    worker: port(17239),
    membership: [port(16933), port(16934), port(16935), port(16939)] as [number, number, number, number],
    metrics: port(17800),
  },
  ui: port(18233),
  redis: port(16379),
  simulator: port(14010),
  apis: Array.from({ length: APIS }, (_, i) => port(13000 + i)),
  // Each worker process serves its own metrics and the SDK runtime's: one port each, never shared.
  workerMetrics: Array.from({ length: WORKERS }, (_, i) => port(19465 + i)),
  sdkMetrics: Array.from({ length: WORKERS }, (_, i) => port(19565 + i)),
};
const dir = path.resolve(process.env.CLUSTER_DIR ?? path.join(DEFAULT_CACHE_DIR, 'cluster'));
const logsDir = path.join(dir, 'logs');
const temporalAddress = `${HOST}:${ports.temporal.frontend}`;

function log(line: string) {
  process.stdout.write(`[cluster] ${line}\n`);
}

const since = (t: number) => `${((Date.now() - t) / 1000).toFixed(1)} s`;

function assertPortFree(p: number, purpose: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const probe = net.createServer();
    probe.once('error', (err: NodeJS.ErrnoException) =>
      reject(
        new Error(
          err.code === 'EADDRINUSE'
            ? `Port ${p} (${purpose}) is already in use on ${HOST}. Is another \`npm run cluster\` running? ` +
                'Stop it, or shift every port with CLUSTER_PORT_OFFSET.'
            : `Cannot bind ${HOST}:${p} (${purpose}): ${err.message}`,
        ),
      ),
    );
    probe.listen(p, HOST, () => probe.close(() => resolve()));
  });
}

const logFiles = new Map<string, WriteStream>();
/** A component's output, appended to `logs/<name>.log` (the terminal gets the supervisor's lines only). */
function logFile(name: string): (line: string) => void {
  let stream = logFiles.get(name);
  if (!stream) {
    stream = createWriteStream(path.join(logsDir, `${name}.log`), { flags: 'a' });
    logFiles.set(name, stream);
  }
  const s = stream;
  return (line) => s.write(`${line}\n`);
}

async function isUp(url: string): Promise<boolean> {
  try {
    return (await fetch(url, { signal: AbortSignal.timeout(1_000) })).ok;
  } catch {
    return false;
  }
}

/** The frontend answers its gRPC health check. */
async function temporalServing(): Promise<boolean> {
  let connection: Connection | undefined;
  try {
    connection = await Connection.connect({ address: temporalAddress, connectTimeout: 1_000 });
    const res = await connection.withDeadline(Date.now() + 2_000, () => connection!.healthService.check({}));
    return res.status === 1; // SERVING
  } catch {
    return false;
  } finally {
    await connection?.close().catch(() => undefined);
  }
}

/** Runs Temporal's sql tool against one database: create it, set up and update its schema (idempotent). */
async function setupSchema(
  sql: string,
  moduleDir: string,
  pg: { host: string; port: number; user: string },
  db: string,
  schema: 'temporal' | 'visibility',
) {
  const base = ['--plugin', 'postgres12', '--ep', pg.host, '-p', String(pg.port), '-u', pg.user, '--db', db];
  const marker = path.join(dir, `schema-${db}.done`);
  const run = (args: string[]) => execFileAsync(sql, [...base, ...args], { timeout: 300_000 });
  if (!existsSync(marker)) {
    await run(['create-database']).catch((err: { stderr?: string }) => {
      if (!/already exists/.test(err.stderr ?? '')) throw err;
    });
    await run(['setup-schema', '-v', '0.0']);
  }
  await run(['update-schema', '-d', path.join(moduleDir, 'schema', 'postgresql', 'v12', schema, 'versioned')]);
  writeFileSync(marker, new Date().toISOString());
}

/** Namespace `default` and the payment search attributes, with the Temporal CLI; waits until the namespace serves. */
async function setupNamespace(cli: string): Promise<void> {
  const run = (args: string[]) =>
    execFileAsync(cli, [...args, '--address', temporalAddress], { timeout: 30_000, env: process.env });
  try {
    await run(['operator', 'namespace', 'describe', '--namespace', NAMESPACE]);
  } catch {
    await run(['operator', 'namespace', 'create', '--namespace', NAMESPACE, '--retention', '72h']);
    log(`namespace ${NAMESPACE} created`);
  }
  const deadline = Date.now() + 60_000;
  for (;;) {
    try {
      const { stdout } = await run(['operator', 'search-attribute', 'list', '--namespace', NAMESPACE, '-o', 'json']);
      const missing = paymentSearchAttributes.filter((a) => !stdout.includes(`"${a.name}"`));
      if (missing.length > 0) {
        await run([
          'operator',
          'search-attribute',
          'create',
          '--namespace',
          NAMESPACE,
          ...missing.flatMap((a) => ['--name', a.name, '--type', a.type === 'DATETIME' ? 'Datetime' : 'Keyword']),
        ]);
        log(`search attributes ${missing.map((a) => a.name).join(', ')} registered`);
      }
      await run(['workflow', 'list', '--namespace', NAMESPACE, '--limit', '1']);
      return;
    } catch (err) {
      if (Date.now() > deadline) throw err;
      await new Promise((r) => setTimeout(r, 1_000));
    }
  }
}

async function main() {
  const started = Date.now();
  mkdirSync(logsDir, { recursive: true });
  const config = loadConfig({ ...process.env, SIMULATOR_URL: `http://${HOST}:${ports.simulator}` });
  const named: [number, string][] = [
    [ports.postgres, 'PostgreSQL'],
    [ports.temporal.frontend, 'Temporal frontend'],
    [ports.temporal.frontendHttp, 'Temporal frontend HTTP'],
    [ports.temporal.history, 'Temporal history'],
    [ports.temporal.matching, 'Temporal matching'],
    [ports.temporal.worker, 'Temporal worker service'],
    ...ports.temporal.membership.map((p): [number, string] => [p, 'Temporal membership']),
    [ports.temporal.metrics, 'Temporal metrics'],
    [ports.ui, 'Temporal web UI'],
    [ports.redis, 'Redis'],
    [ports.simulator, 'simulator'],
    ...ports.apis.map((p, i): [number, string] => [p, `api-${i + 1}`]),
    ...ports.workerMetrics.map((p, i): [number, string] => [p, `worker-${i + 1} metrics`]),
    ...ports.sdkMetrics.map((p, i): [number, string] => [p, `worker-${i + 1} SDK metrics`]),
  ];
  for (const [p, purpose] of named) await assertPortFree(p, purpose);

  // 1. Binaries (cached after the first run) and the workflow bundle every worker loads.
  let t = Date.now();
  const build = await ensureTemporalServer(log);
  const ui = await ensureUiServer(log);
  const resolvedCli = await resolveBinary(TEMPORAL_CLI, { log });
  if (resolvedCli.executable.type !== 'existing-path') {
    throw new Error(
      `the Temporal CLI is needed as a file (set TEMPORAL_CLI_PATH); tried: ${resolvedCli.tried.join('; ')}`,
    );
  }
  const cli = { path: resolvedCli.executable.path, source: resolvedCli.source };
  log(`Temporal server ${build.source}; CLI from ${cli.source} (${since(t)})`);
  t = Date.now();
  const bundlePath = path.join(dir, 'workflow-bundle.js');
  const { code } = await bundleWorkflowCode({
    workflowsPath: require.resolve('../src/workflows'),
    logger: { log() {}, trace() {}, debug() {}, info() {}, warn() {}, error: (m: string) => log(m) },
  });
  writeFileSync(bundlePath, code);
  log(`workflow bundle built (${(code.length / 1024).toFixed(0)} KiB, ${since(t)})`);

  let stopping = false;
  let redis: RunningRedis | undefined;
  let redisWatch: NodeJS.Timeout | undefined;
  const stackFile = path.join(dir, 'stack.json');
  const writeStack = (services: ServiceStatus[]) => {
    if (stopping) return;
    const all = [
      ...services,
      ...(redis ? [{ name: 'redis', pid: redis.pid, state: 'running', restarts: redisRestarts }] : []),
    ];
    writeFileSync(
      stackFile,
      JSON.stringify(
        {
          kind: 'cluster',
          temporalAddress,
          namespace: NAMESPACE,
          taskQueue: config.TASK_QUEUE,
          simulatorUrl: `http://${HOST}:${ports.simulator}`,
          providerApiKey: config.PROVIDER_API_KEY,
          apiUrls: ports.apis.map((p) => `http://${HOST}:${p}`),
          webUi: ui ? `http://${HOST}:${ports.ui}` : undefined,
          redisUrl: `redis://${HOST}:${ports.redis}`,
          postgres: `${HOST}:${ports.postgres}`,
          startPid: process.pid,
          services: Object.fromEntries(all.map((s) => [s.name, { pid: s.pid, state: s.state, restarts: s.restarts }])),
        },
        null,
        2,
      ),
    );
  };
  let redisRestarts = 0;
  const supervisor = new Supervisor({ log, onGiveUp: () => void stop(1), onChange: writeStack });
  const stop = async (code: number) => {
    if (stopping) return;
    stopping = true;
    log('Stopping: APIs, workers, simulator, web UI, Redis, Temporal, then PostgreSQL...');
    clearInterval(redisWatch);
    await supervisor.stop();
    await redis?.stop();
    for (const s of logFiles.values()) s.end();
    log(`Stopped.`);
    process.exit(code);
  };
  process.on('SIGINT', () => void stop(0));
  process.on('SIGTERM', () => void stop(0));

  try {
    // 2. PostgreSQL and the schemas.
    t = Date.now();
    const pg = await preparePostgres({
      dir: path.join(dir, 'postgres'),
      port: ports.postgres,
      log,
      output: logFile('postgres'),
    });
    await supervisor.start({ ...pg.spec, tier: 0 });
    log(`PostgreSQL up (${pg.version}, ${since(t)})`);
    t = Date.now();
    await setupSchema(build.sql, build.moduleDir, pg, 'temporal', 'temporal');
    await setupSchema(build.sql, build.moduleDir, pg, 'temporal_visibility', 'visibility');
    log(`schemas temporal and temporal_visibility ready (${since(t)})`);
    // Wallets and key records: database `payments` beside Temporal's (the workers and APIs migrate it at start).
    const paymentsDatabaseUrl = await ensurePaymentsDatabase(pg);

    // 3. The Temporal server, its namespace and search attributes, its web UI.
    t = Date.now();
    const root = path.join(dir, 'temporal');
    writeServerConfig({ build, root, ports: ports.temporal, postgres: pg, numHistoryShards: NUM_HISTORY_SHARDS });
    await supervisor.start({
      name: 'temporal',
      command: build.server,
      args: ['--root', root, '--config', 'config', '--env', 'development', 'start'],
      cwd: root,
      tier: 1,
      ready: temporalServing,
      readyTimeoutMs: 120_000,
      // Idempotent; after a restart it only checks.
      afterReady: () => setupNamespace(cli.path),
      stopTimeoutMs: 20_000,
      output: logFile('temporal'),
    });
    log(`Temporal server up with namespace ${NAMESPACE} and the search attributes (${since(t)})`);
    if (ui) {
      const uiRoot = path.join(dir, 'ui');
      writeUiConfig(uiRoot, temporalAddress, ports.ui);
      await supervisor.start({
        name: 'web-ui',
        command: ui,
        args: ['--root', uiRoot, '--config', 'config', '--env', 'development', 'start'],
        cwd: uiRoot,
        tier: 1,
        ready: () => isUp(`http://${HOST}:${ports.ui}/`),
        output: logFile('web-ui'),
      });
    }

    // 4. Redis, kept running: a Redis that dies is started again on its port.
    t = Date.now();
    redis = await startRedisServer({ port: ports.redis });
    log(`Redis up at ${redis.url} (${since(t)})`);
    const redisPolicy = new CrashPolicy();
    let redisRestarting = false;
    redisWatch = setInterval(() => {
      if (stopping || redisRestarting || !redis?.pid) return;
      try {
        process.kill(redis.pid, 0);
        return;
      } catch {
        // gone
      }
      const verdict = redisPolicy.crashed();
      if (verdict.action === 'give_up') {
        log(`redis exited: ${verdict.crashesInWindow} crashes within a minute; stopping the stack.`);
        void stop(1);
        return;
      }
      redisRestarting = true;
      const crashedAt = Date.now();
      log(`redis exited unexpectedly; restarting in ${(verdict.delayMs / 1000).toFixed(1)} s`);
      setTimeout(() => {
        if (stopping) return;
        startRedisServer({ port: ports.redis }).then(
          (r) => {
            redis = r;
            redisRestarts += 1;
            redisRestarting = false;
            log(`redis restarted (pid ${r.pid}), ready ${since(crashedAt)} after the crash`);
            writeStack(supervisor.status());
          },
          (err: unknown) => {
            redisRestarting = false;
            log(`redis restart failed: ${err instanceof Error ? err.message : String(err)}`);
          },
        );
      }, verdict.delayMs);
    }, 500);

    // 5. Simulator, workers, APIs.
    const node = (entry: string) => ['--import', 'tsx', path.join(PROJECT_ROOT, entry)];
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      TEMPORAL_ADDRESS: temporalAddress,
      TEMPORAL_NAMESPACE: NAMESPACE,
      SIMULATOR_PORT: String(ports.simulator),
      SIMULATOR_URL: `http://${HOST}:${ports.simulator}`,
      SIMULATOR_STATE_PATH: path.join(dir, 'simulator.json'),
      WORKFLOW_BUNDLE_PATH: bundlePath,
      REDIS_URL: `redis://${HOST}:${ports.redis}`,
      DATABASE_URL: paymentsDatabaseUrl,
    };
    t = Date.now();
    await supervisor.start({
      name: 'simulator',
      command: process.execPath,
      args: node('src/simulator/main.ts'),
      cwd: PROJECT_ROOT,
      env,
      tier: 2,
      ready: () => isUp(`http://${HOST}:${ports.simulator}/_sim/health`),
      afterReady: async () => {
        const res = await fetch(
          `http://${HOST}:${ports.simulator}/_sim/merchants/${encodeURIComponent(config.PROVIDER_API_KEY)}`,
          {
            method: 'PUT',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({
              idempotency: config.PROVIDER_IDEMPOTENCY,
              key_ttl_s: config.PROVIDER_KEY_TTL_S,
              webhook_url: `http://${HOST}:${ports.apis[0]}/webhooks/simulator`,
              webhook_secret: config.WEBHOOK_SECRET,
            }),
          },
        );
        if (!res.ok) throw new Error(`configuring the simulator merchant failed: ${res.status}`);
      },
      output: logFile('simulator'),
    });
    const workerReady = /"msg":"worker running"/;
    await Promise.all(
      Array.from({ length: WORKERS }, (_, i) =>
        supervisor.start({
          name: `worker-${i + 1}`,
          command: process.execPath,
          args: node('src/worker.ts'),
          cwd: PROJECT_ROOT,
          env: {
            ...env,
            LOG_LEVEL: process.env.LOG_LEVEL ?? 'info',
            WORKER_METRICS_ADDRESS: `${HOST}:${ports.workerMetrics[i] as number}`,
            SDK_METRICS_ADDRESS: `${HOST}:${ports.sdkMetrics[i] as number}`,
          },
          tier: 3,
          readyLine: workerReady,
          readyTimeoutMs: 120_000,
          output: logFile(`worker-${i + 1}`),
        }),
      ),
    );
    await Promise.all(
      ports.apis.map((p, i) =>
        supervisor.start({
          name: `api-${i + 1}`,
          command: process.execPath,
          args: node('src/api/main.ts'),
          cwd: PROJECT_ROOT,
          env: { ...env, PORT: String(p), HOST },
          tier: 4,
          ready: () => isUp(`http://${HOST}:${p}/healthz`),
          output: logFile(`api-${i + 1}`),
        }),
      ),
    );
    log(`simulator, ${WORKERS} workers and ${APIS} APIs up (${since(t)})`);
  } catch (err) {
    log(err instanceof Error ? err.message : String(err));
    await stop(1);
    return;
  }

  const [token] = config.API_TOKENS;
  const cliHint = path.relative(PROJECT_ROOT, cli.path);
  log('');
  log(`Cluster up in ${since(started)}.`);
  log(
    `PostgreSQL:            ${HOST}:${ports.postgres} (user postgres; databases temporal, temporal_visibility, payments)`,
  );
  log(`Temporal frontend:     ${temporalAddress} (namespace ${NAMESPACE}, ${NUM_HISTORY_SHARDS} history shards)`);
  log(
    ui
      ? `Temporal web UI:       http://${HOST}:${ports.ui}/namespaces/${NAMESPACE}/workflows`
      : 'Temporal web UI:       not available (see above); use the CLI below',
  );
  log(`Redis:                 redis://${HOST}:${ports.redis}`);
  log(`Provider simulator:    http://${HOST}:${ports.simulator}`);
  for (const [i, p] of ports.apis.entries()) log(`Payments API ${i + 1}:        http://${HOST}:${p}`);
  log(`Workers:               ${WORKERS} processes on task queue ${config.TASK_QUEUE}`);
  if (token) log(`Dev token (merchant ${token.merchantId}): ${token.token}`);
  log(
    `Payments by status:    ${cliHint} workflow list --address ${temporalAddress} --query 'PaymentStatus="succeeded"'`,
  );
  const shown = (p: string) => (p.startsWith(PROJECT_ROOT + path.sep) ? path.relative(PROJECT_ROOT, p) : p);
  log(`Logs: ${shown(logsDir)}/   pids: ${shown(stackFile)}`);
  log('Chaos soak against it: npm run soak. Press Ctrl-C to stop.');
}

main().catch((err: unknown) => {
  console.error(`[cluster] ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
});
