/**
 * The real Temporal server for `npm run cluster`: built once from the Go module proxy with `go install` (the module
 * needs a newer Go than the machine may have: `GOTOOLCHAIN` fetches that toolchain from the proxy too), cached in
 * `.temporal/server-<version>/bin/` (`server` and Temporal's `sql` schema tool), and its web UI (`ui-server`, the same
 * module the CLI's dev server embeds) in `.temporal/ui-server-<version>/bin/`. Its configuration is written from the
 * module's own `config/development-postgres12.yaml` with our ports, PostgreSQL and shard count.
 */
import { execFile, spawn } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { parse, stringify } from 'yaml';
import { deployment } from './deployment';
import { singleBoxDynamicConfig } from './dev-server';
import { DEFAULT_CACHE_DIR, isExecutable } from './temporal-binaries';

const execFileAsync = promisify(execFile);

/** The server release of the deployment (scripts/lib/deployment.ts), its Go toolchain. */
export const TEMPORAL_SERVER = {
  module: 'go.temporal.io/server',
  version: `v${deployment.temporalServer}`,
  toolchain: 'go1.26.10',
} as const;
/** The deployment's web UI (the one the CLI 1.9.1 dev server embeds), as a standalone server. */
export const UI_SERVER = {
  module: 'github.com/temporalio/ui-server/v2',
  version: `v${deployment.temporalUi}`,
} as const;

export interface TemporalBuild {
  readonly server: string;
  readonly sql: string;
  /** The module's source directory: `schema/` and `config/` come from there. */
  readonly moduleDir: string;
  /** `cache` or `built in N s`. */
  readonly source: string;
}

function goEnv(): NodeJS.ProcessEnv {
  return { ...process.env, GOTOOLCHAIN: process.env.GOTOOLCHAIN ?? TEMPORAL_SERVER.toolchain, GOFLAGS: '-mod=mod' };
}

/** `go install pkg@version` into `bin`, its output to `log` line by line. */
function goInstall(pkg: string, version: string, bin: string, log: (line: string) => void): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn('go', ['install', `${pkg}@${version}`], {
      env: { ...goEnv(), GOBIN: bin },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const lines = (d: Buffer) =>
      d
        .toString()
        .split('\n')
        .filter(Boolean)
        .forEach((l) => log(`  go: ${l}`));
    child.stdout.on('data', lines);
    child.stderr.on('data', lines);
    child.once('error', (err) =>
      reject(new Error(`go install ${pkg}@${version}: ${err.message} (is Go on the PATH? https://go.dev/dl)`)),
    );
    child.once('exit', (code) =>
      code === 0 ? resolve() : reject(new Error(`go install ${pkg}@${version} exited with ${code}`)),
    );
  });
}

/** The module's directory in the Go module cache (downloaded when missing). */
async function moduleDir(module: string, version: string): Promise<string> {
  const { stdout } = await execFileAsync('go', ['mod', 'download', '-json', `${module}@${version}`], {
    env: goEnv(),
    timeout: 10 * 60_000,
    maxBuffer: 10 * 1024 * 1024,
  });
  const dir = (JSON.parse(stdout) as { Dir?: string }).Dir;
  if (!dir) throw new Error(`go mod download ${module}@${version} named no directory`);
  return dir;
}

/** The server and its sql tool, built once (about 3 minutes of two cores, more on a busy machine). */
export async function ensureTemporalServer(
  log: (line: string) => void,
  cacheDir = DEFAULT_CACHE_DIR,
): Promise<TemporalBuild> {
  const bin = path.join(cacheDir, `server-${TEMPORAL_SERVER.version.replace(/^v/, '')}`, 'bin');
  const server = path.join(bin, 'server');
  const sql = path.join(bin, 'sql');
  let source = 'cache';
  if (!isExecutable(server) || !isExecutable(sql)) {
    mkdirSync(bin, { recursive: true });
    const started = Date.now();
    log(
      `Building Temporal server ${TEMPORAL_SERVER.version} and its sql tool with go install ` +
        `(GOTOOLCHAIN=${TEMPORAL_SERVER.toolchain}, from the Go module proxy) into ${bin}: ` +
        'once, about 3 minutes of two cores (10 on a busy machine)...',
    );
    await goInstall(`${TEMPORAL_SERVER.module}/cmd/server`, TEMPORAL_SERVER.version, bin, log);
    await goInstall(`${TEMPORAL_SERVER.module}/cmd/tools/sql`, TEMPORAL_SERVER.version, bin, log);
    source = `built in ${((Date.now() - started) / 1000).toFixed(0)} s`;
    log(`Temporal server ${source}.`);
  }
  return { server, sql, moduleDir: await moduleDir(TEMPORAL_SERVER.module, TEMPORAL_SERVER.version), source };
}

/** The standalone web UI server, built once (under a minute); undefined (with the reason logged) when it cannot be. */
export async function ensureUiServer(
  log: (line: string) => void,
  cacheDir = DEFAULT_CACHE_DIR,
): Promise<string | undefined> {
  const bin = path.join(cacheDir, `ui-server-${UI_SERVER.version.replace(/^v/, '')}`, 'bin');
  const executable = path.join(bin, 'server');
  if (isExecutable(executable)) return executable;
  mkdirSync(bin, { recursive: true });
  const started = Date.now();
  log(`Building the Temporal web UI server ${UI_SERVER.version} with go install into ${bin} (once, about a minute)...`);
  try {
    await goInstall(`${UI_SERVER.module}/cmd/server`, UI_SERVER.version, bin, log);
    log(`web UI server built in ${((Date.now() - started) / 1000).toFixed(0)} s.`);
    return executable;
  } catch (err) {
    log(`No web UI: ${err instanceof Error ? err.message : String(err)}; use the Temporal CLI instead.`);
    return undefined;
  }
}

/** Ports of one Temporal server (all services in one process). */
export interface TemporalPorts {
  readonly frontend: number;
  readonly frontendHttp: number;
  readonly history: number;
  readonly matching: number;
  readonly worker: number;
  /** Membership ports: frontend, history, matching, worker. */
  readonly membership: readonly [number, number, number, number];
  readonly metrics: number;
}

export interface ServerConfigOptions {
  readonly build: TemporalBuild;
  /** The server's root: `config/development.yaml` and `config/dynamicconfig/` are written there. */
  readonly root: string;
  readonly ports: TemporalPorts;
  readonly postgres: { readonly host: string; readonly port: number; readonly user: string };
  readonly numHistoryShards: number;
}

/** Writes the server's configuration from the module's PostgreSQL 12+ development config. */
export function writeServerConfig(o: ServerConfigOptions): void {
  const template = readFileSync(path.join(o.build.moduleDir, 'config', 'development-postgres12.yaml'), 'utf8');
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- the server's config schema is Go's, not ours
  const config = parse(template) as any;
  config.log = { stdout: true, level: 'warn' };
  config.persistence.numHistoryShards = o.numHistoryShards;
  for (const store of Object.values(config.persistence.datastores) as { sql: Record<string, unknown> }[]) {
    store.sql.connectAddr = `${o.postgres.host}:${o.postgres.port}`;
    store.sql.user = o.postgres.user;
    store.sql.password = '';
  }
  config.global.pprof = { port: 0 };
  config.global.metrics.prometheus.listenAddress = `127.0.0.1:${o.ports.metrics}`;
  const [mFrontend, mHistory, mMatching, mWorker] = o.ports.membership;
  config.services.frontend.rpc = {
    grpcPort: o.ports.frontend,
    membershipPort: mFrontend,
    bindOnLocalHost: true,
    httpPort: o.ports.frontendHttp,
  };
  config.services.history.rpc = { grpcPort: o.ports.history, membershipPort: mHistory, bindOnLocalHost: true };
  config.services.matching.rpc = { grpcPort: o.ports.matching, membershipPort: mMatching, bindOnLocalHost: true };
  config.services.worker.rpc = { grpcPort: o.ports.worker, membershipPort: mWorker, bindOnLocalHost: true };
  config.clusterMetadata.clusterInformation.active.rpcAddress = `127.0.0.1:${o.ports.frontend}`;
  // Archival off: nothing of ours is archived, and it would write under /tmp.
  config.archival = { history: { state: 'disabled' }, visibility: { state: 'disabled' } };
  config.namespaceDefaults = { archival: { history: { state: 'disabled' }, visibility: { state: 'disabled' } } };
  const dynamicConfig = path.join(o.root, 'config', 'dynamicconfig', 'cluster.yaml');
  config.dynamicConfigClient = { filepath: dynamicConfig, pollInterval: '10s' };
  mkdirSync(path.dirname(dynamicConfig), { recursive: true });
  writeFileSync(path.join(o.root, 'config', 'development.yaml'), stringify(config));
  writeFileSync(dynamicConfig, stringify(clusterDynamicConfig()));
}

/**
 * The server's dynamic configuration (the file's shape: key -> list of constrained values), the same for the cluster
 * and docker-compose.yml's server (test/foundation/compose.test.ts compares them). `TEMPORAL_SUGGEST_CONTINUE_AS_NEW`
 * (an adversary for soaks, never for production) makes the server suggest continue-as-new past that many history
 * events instead of its thousands, so long-lived payments continue as new under the soak's chaos.
 */
export function clusterDynamicConfig(
  env: NodeJS.ProcessEnv = process.env,
): Record<string, { value: unknown; constraints?: Record<string, never> }[]> {
  const suggest = env.TEMPORAL_SUGGEST_CONTINUE_AS_NEW;
  return {
    ...(suggest ? { 'limit.historyCount.suggestContinueAsNew': [{ value: Number(suggest), constraints: {} }] } : {}),
    'limit.maxIDLength': [{ value: 255, constraints: {} }],
    // A search attribute registered a moment ago is usable at once (the namespace is set up right before use).
    'system.forceSearchAttributesCacheRefreshOnRead': [{ value: true, constraints: {} }],
    'frontend.workerVersioningDataAPIs': [{ value: true }],
    'frontend.workerVersioningWorkflowAPIs': [{ value: true }],
    // Every POST /v1/payments asks visibility whether the order has an open payment: the default of 10 visibility
    // requests per second per frontend refused them (ResourceExhausted, answered 503) past ~5 payments/s.
    'frontend.namespaceRPS.visibility': [{ value: 500, constraints: {} }],
    'frontend.namespaceBurstRatio.visibility': [{ value: 2, constraints: {} }],
    // Per-shard task hand-off limits (20 by default), as on the single-box dev server (see dev-server.ts).
    ...Object.fromEntries(
      Object.entries(singleBoxDynamicConfig).map(([key, value]) => [key, [{ value, constraints: {} }]]),
    ),
  };
}

/** Writes the web UI server's configuration (`<root>/config/development.yaml`). */
export function writeUiConfig(root: string, temporalAddress: string, port: number): void {
  mkdirSync(path.join(root, 'config'), { recursive: true });
  writeFileSync(
    path.join(root, 'config', 'development.yaml'),
    stringify({
      temporalGrpcAddress: temporalAddress,
      host: '127.0.0.1',
      port,
      enableUi: true,
      defaultNamespace: 'default',
      disableNewsFetch: true,
      cors: { cookieInsecure: true, allowOrigins: [`http://127.0.0.1:${port}`] },
      refreshInterval: '1m',
    }),
  );
}
