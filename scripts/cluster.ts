/**
 * `npm run cluster`: the production-shaped stack on this machine, without Docker.
 *   - PostgreSQL 15 from the machine (persistence and visibility), data under `.temporal/cluster/postgres/`;
 *   - the real Temporal server (built once with `go install`, see scripts/lib/temporal-server.ts), all services in one
 *     process, 4 history shards; schemas set up with Temporal's own sql tool, namespace `default` (retention 72 h) and
 *     the four payment search attributes with the provisioned Temporal CLI, both by the scripts docker-compose.yml's
 *     setup jobs run (scripts/temporal-setup/); versions, shards and retention from scripts/lib/deployment.ts;
 *   - the Temporal web UI (`ui-server`, built once the same way) pointed at it;
 *   - Redis (issue 9's shared breaker store; `startRedisServer` from scripts/lib/redis-server.ts);
 *   - the provider simulator (state in `.temporal/cluster/simulator.json`), three worker processes, two API processes.
 * Every process is supervised: one that exits is restarted with a backoff and a log line (5 crashes within a minute
 * stop the stack), and dies with this script however it dies (SIGKILL included); a start that finds what an earlier
 * one left stops it first. Component logs go to `.temporal/cluster/logs/`; pids and addresses to
 * `.temporal/cluster/stack.json` (read by `npm run soak`). Ctrl-C, SIGTERM or SIGHUP stop everything, APIs first,
 * PostgreSQL last.
 *
 * Ports: fixed defaults (frontend 17233, web UI 18233, APIs 13000 and 13001, ...), all shifted by CLUSTER_PORT_OFFSET.
 * CLUSTER_DIR names another state directory; delete it for a clean slate.
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { bundleWorkflowCode } from '@temporalio/worker';
import { failureConverterPath } from '../src/codec';
import { loadConfig } from '../src/config';
import { paymentSearchAttributes } from '../src/domain/search-attributes';
import { CrashPolicy } from './lib/crash-policy';
import { deployment } from './lib/deployment';
import { cliAttributeType } from './lib/dev-server';
import { LogFiles } from './lib/log-files';
import { type StackPort, assertPortsFree } from './lib/ports';
import { preparePostgres } from './lib/postgres';
import { ensurePaymentsDatabase } from './lib/payments-database';
import { processStart } from './lib/processes';
import { isUp, temporalServing } from './lib/readiness';
import { type RunningRedis, startRedisServer } from './lib/redis-server';
import { describeReclaim, reclaimStaleStack, recordStack } from './lib/stale-stack';
import { onStopSignals } from './lib/stop-signals';
import { type ServiceStatus, Supervisor } from './lib/supervisor';
import { DEFAULT_CACHE_DIR, PROJECT_ROOT, TEMPORAL_CLI, resolveBinary } from './lib/temporal-binaries';
import { ensureTemporalServer, ensureUiServer, writeServerConfig, writeUiConfig } from './lib/temporal-server';

const execFileAsync = promisify(execFile);
const HOST = '127.0.0.1';
const NAMESPACE = deployment.namespace;
const WORKERS = deployment.workers;
const APIS = deployment.apis;
const NUM_HISTORY_SHARDS = deployment.numHistoryShards;
/** The setup scripts docker-compose.yml's jobs run, run here the same way. */
const SETUP_SCRIPTS = path.join(PROJECT_ROOT, 'scripts', 'temporal-setup');

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
/**
 * Per-worker settings over the stack's (`{ "worker-1": { "PROVIDER_TOTAL_TIMEOUT_MS": "9000" } }`), read at every
 * (re)start of a worker: a soak's rolling deploy writes it, then stops the worker, and the supervisor starts it again
 * with them.
 */
const workerEnvFile = path.join(dir, 'worker-env.json');
const workerOverrides = (name: string): NodeJS.ProcessEnv => {
  try {
    return (JSON.parse(readFileSync(workerEnvFile, 'utf8')) as Record<string, NodeJS.ProcessEnv>)[name] ?? {};
  } catch {
    return {};
  }
};
const temporalAddress = `${HOST}:${ports.temporal.frontend}`;

function log(line: string) {
  process.stdout.write(`[cluster] ${line}\n`);
}

const since = (t: number) => `${((Date.now() - t) / 1000).toFixed(1)} s`;

/** Every port the cluster binds: the base port and its purpose; CLUSTER_PORT_OFFSET moves them all. */
function clusterPorts(): StackPort[] {
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
  return named.map(([p, purpose]) => ({
    port: p,
    purpose: `${purpose}: ${p - offset} + CLUSTER_PORT_OFFSET ${offset}`,
    change: 'set CLUSTER_PORT_OFFSET to shift every port of the cluster (e.g. CLUSTER_PORT_OFFSET=100)',
  }));
}

/** Runs one of the setup scripts (scripts/temporal-setup/) with `env`, its output into the log file `name`. */
/** `fn` until it has succeeded once; later calls resolve at once (an `afterReady` for the first start only). */
function once(fn: () => Promise<void>): () => Promise<void> {
  let done = false;
  return async () => {
    if (done) return;
    await fn();
    done = true;
  };
}

async function runSetupScript(script: string, env: NodeJS.ProcessEnv, output: (line: string) => void): Promise<void> {
  try {
    const { stdout, stderr } = await execFileAsync('sh', [path.join(SETUP_SCRIPTS, script)], {
      env: { ...process.env, ...env },
      timeout: 300_000,
      maxBuffer: 16 * 1024 * 1024,
    });
    for (const line of `${stdout}${stderr}`.split('\n').filter(Boolean)) output(line);
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string; message: string };
    for (const line of `${e.stdout ?? ''}${e.stderr ?? ''}`.split('\n').filter(Boolean)) output(line);
    const tail = (e.stderr ?? '').trim().split('\n').slice(-3).join(' | ');
    throw new Error(`scripts/temporal-setup/${script} failed: ${tail || e.message}`);
  }
}

async function main() {
  const started = Date.now();
  mkdirSync(dir, { recursive: true });
  rmSync(workerEnvFile, { force: true });
  const config = loadConfig({ ...process.env, SIMULATOR_URL: `http://${HOST}:${ports.simulator}` });
  const logs = new LogFiles(logsDir);
  let stopping = false;
  let stop: (code: number) => Promise<void> = async (code) => {
    stopping = true;
    process.exit(code);
  };
  onStopSignals(() => void stop(0));
  // What an earlier cluster on this state left running (its script killed) is stopped first; a script still running
  // is another cluster on this state, and this one refuses.
  const stackFile = path.join(dir, 'stack.json');
  const reclaimed = await reclaimStaleStack(stackFile, { what: 'npm run cluster', graceMs: 30_000 });
  for (const line of describeReclaim(reclaimed, 'npm run cluster')) log(line);
  // Ports the stopped processes held may be released a moment after they are gone.
  await assertPortsFree(clusterPorts(), undefined, { waitMs: reclaimed.stopped.length > 0 ? 5_000 : 0 });

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
    failureConverterPath,
    logger: { log() {}, trace() {}, debug() {}, info() {}, warn() {}, error: (m: string) => log(m) },
  });
  writeFileSync(bundlePath, code);
  log(`workflow bundle built (${(code.length / 1024).toFixed(0)} KiB, ${since(t)})`);

  let redis: RunningRedis | undefined;
  let redisWatch: NodeJS.Timeout | undefined;
  const writeStack = (services: ServiceStatus[]) => {
    if (stopping) return;
    const all = [
      ...services,
      ...(redis
        ? [
            {
              name: 'redis',
              pid: redis.pid,
              start: redis.pid === undefined ? undefined : processStart(redis.pid),
              stopSignal: 'SIGTERM' as const,
              state: 'running',
              restarts: redisRestarts,
            },
          ]
        : []),
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
          workerEnvFile,
          apiUrls: ports.apis.map((p) => `http://${HOST}:${p}`),
          webUi: ui ? `http://${HOST}:${ports.ui}` : undefined,
          redisUrl: `redis://${HOST}:${ports.redis}`,
          postgres: `${HOST}:${ports.postgres}`,
          ...recordStack(all),
        },
        null,
        2,
      ),
    );
  };
  let redisRestarts = 0;
  const supervisor = new Supervisor({ log, onGiveUp: () => void stop(1), onChange: writeStack });
  stop = async (code: number) => {
    if (stopping) return;
    stopping = true;
    log('Stopping: APIs, workers, simulator, web UI, Redis, Temporal, then PostgreSQL...');
    clearInterval(redisWatch);
    await supervisor.stop();
    await redis?.stop();
    // Nothing left to find: the next start has no stale stack to check.
    if (existsSync(stackFile)) rmSync(stackFile, { force: true });
    await logs.close();
    log(`Stopped.`);
    process.exit(code);
  };

  try {
    // 2. PostgreSQL and the schemas.
    t = Date.now();
    const pg = await preparePostgres({
      dir: path.join(dir, 'postgres'),
      port: ports.postgres,
      log,
      output: logs.writer('postgres'),
    });
    await supervisor.start({ ...pg.spec, tier: 0, lastLines: () => logs.lastLines('postgres') });
    log(`PostgreSQL up (${pg.version}, ${since(t)})`);
    t = Date.now();
    await runSetupScript(
      'schema.sh',
      {
        TEMPORAL_SQL_TOOL: build.sql,
        SCHEMA_DIR: path.join(build.moduleDir, 'schema'),
        SQL_PLUGIN: 'postgres12',
        SQL_HOST: pg.host,
        SQL_PORT: String(pg.port),
        SQL_USER: pg.user,
        SQL_PASSWORD: '',
      },
      logs.writer('temporal-setup'),
    );
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
      ready: () => temporalServing(temporalAddress),
      readyTimeoutMs: 120_000,
      // Once, at the first start: the namespace and its search attributes live in PostgreSQL, so a restart keeps them.
      // Run again after a restart, its visibility check ran into its 60 s deadline on a loaded machine (the server was
      // serving, working through its backlog), the restart counted as failed and the server was SIGKILLed, again and
      // again: the 10,000 soak saw Temporal killed 8 times in a row after one planned restart.
      afterReady: once(() =>
        runSetupScript(
          'namespace.sh',
          {
            TEMPORAL_CLI: cli.path,
            TEMPORAL_ADDRESS: temporalAddress,
            NAMESPACE,
            NAMESPACE_RETENTION: deployment.namespaceRetention,
            SEARCH_ATTRIBUTES: paymentSearchAttributes.map((a) => `${a.name}=${cliAttributeType(a.type)}`).join(' '),
            SETUP_TIMEOUT_S: '60',
          },
          logs.writer('temporal-setup'),
        ),
      ),
      stopTimeoutMs: 20_000,
      output: logs.writer('temporal'),
      lastLines: () => logs.lastLines('temporal'),
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
        output: logs.writer('web-ui'),
        lastLines: () => logs.lastLines('web-ui'),
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
      output: logs.writer('simulator'),
      lastLines: () => logs.lastLines('simulator'),
    });
    const workerReady = /"msg":"worker running"/;
    await Promise.all(
      Array.from({ length: WORKERS }, (_, i) =>
        supervisor.start({
          name: `worker-${i + 1}`,
          command: process.execPath,
          args: node('src/worker.ts'),
          cwd: PROJECT_ROOT,
          // A getter: the supervisor reads it at every (re)start, so a rolling deploy's settings take effect.
          get env() {
            return {
              ...env,
              LOG_LEVEL: process.env.LOG_LEVEL ?? 'info',
              WORKER_METRICS_ADDRESS: `${HOST}:${ports.workerMetrics[i] as number}`,
              SDK_METRICS_ADDRESS: `${HOST}:${ports.sdkMetrics[i] as number}`,
              ...workerOverrides(`worker-${i + 1}`),
            };
          },
          tier: 3,
          readyLine: workerReady,
          readyTimeoutMs: 120_000,
          output: logs.writer(`worker-${i + 1}`),
          lastLines: () => logs.lastLines(`worker-${i + 1}`),
        }),
      ),
    );
    await Promise.all(
      ports.apis.map((p, i) =>
        supervisor.start({
          name: `api-${i + 1}`,
          command: process.execPath,
          args: node('src/api-main.ts'),
          cwd: PROJECT_ROOT,
          env: { ...env, PORT: String(p), HOST },
          tier: 4,
          ready: () => isUp(`http://${HOST}:${p}/healthz`),
          output: logs.writer(`api-${i + 1}`),
          lastLines: () => logs.lastLines(`api-${i + 1}`),
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
  log(
    `Temporal frontend:     ${temporalAddress} (namespace ${NAMESPACE}, retention ${deployment.namespaceRetention}, ` +
      `${NUM_HISTORY_SHARDS} history shards)`,
  );
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
    `Temporal CLI:          ${cliHint} (not on the PATH; or: TEMPORAL_ADDRESS=${temporalAddress} npm run temporal -- ...)`,
  );
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
