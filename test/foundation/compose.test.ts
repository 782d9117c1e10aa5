/**
 * docker-compose.yml cannot run here (no Docker engine), so it is checked statically, and held to `npm run cluster`,
 * which does run here: it is a valid Compose file (the Compose Specification's JSON schema); its Temporal server,
 * admin-tools and web UI images, shard count, namespace retention, replica counts, dynamic config and setup scripts
 * are the cluster's (scripts/lib/deployment.ts, scripts/lib/temporal-server.ts, scripts/temporal-setup/); every
 * environment name it gives our containers is one our code reads, and the values are accepted in production mode; the
 * start order is expressed with healthchecks and depends_on conditions.
 */
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import Ajv2020 from 'ajv/dist/2020';
import pino from 'pino';
import { parse } from 'yaml';
import { deployment } from '../../scripts/lib/deployment';
import { cliAttributeType } from '../../scripts/lib/dev-server';
import { clusterDynamicConfig } from '../../scripts/lib/temporal-server';
import { loadConfig, readsVariable } from '../../src/config';
import { paymentSearchAttributes } from '../../src/domain/search-attributes';
import { SimulatorEnv } from '../../src/simulator/env';
import { checkWorkerCapacity } from '../../src/stack';

const root = path.resolve(__dirname, '..', '..');

interface Service {
  image?: string;
  build?: string;
  command?: string[] | string;
  entrypoint?: string[];
  environment?: Record<string, string>;
  ports?: string[];
  volumes?: string[];
  configs?: { source: string; target: string }[];
  healthcheck?: { test: string[] };
  restart?: string;
  deploy?: { replicas?: number };
  depends_on?: Record<string, { condition: string }>;
}
interface ComposeFile {
  services: Record<string, Service>;
  configs?: Record<string, { content?: string }>;
  [key: string]: unknown;
}

const text = readFileSync(path.join(root, 'docker-compose.yml'), 'utf8');
/** As compose reads it: YAML merge keys (`<<: *app`) resolved. */
const compose = parse(text, { merge: true }) as ComposeFile;
const service = (name: string): Service => {
  const s = compose.services[name];
  if (!s) throw new Error(`docker-compose.yml has no service ${name}`);
  return s;
};
const dockerfile = readFileSync(path.join(root, 'Dockerfile'), 'utf8');
const pkg = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
/** Our image's services: the product (config.ts) and the simulator (src/simulator/env.ts). */
const productServices = ['worker', 'api', 'simulator-setup'] as const;

/** `${VAR:?message}` as docker compose would substitute it when the user set VAR. */
const substitute = (value: string) => value.replace(/\$\{(\w+):\?[^}]*\}/g, (_m, name: string) => `set-${name}`);
const productionSecrets = {
  API_TOKENS: 'm1:token-of-merchant-one',
  OPERATOR_TOKENS: 'ops:token-of-the-operators',
  PAYLOAD_KEYS: `k1:${Buffer.alloc(32, 7).toString('base64')}`,
};
const envOf = (name: string) =>
  Object.fromEntries(Object.entries(service(name).environment ?? {}).map(([k, v]) => [k, substitute(String(v))]));

describe('the Compose Specification', () => {
  const schemaFile = path.join(__dirname, 'compose-spec', 'compose-spec.json');
  const schemaText = readFileSync(schemaFile);
  const validate = new Ajv2020({ strict: false, allErrors: true, validateFormats: false }).compile(
    JSON.parse(schemaText.toString('utf8')) as object,
  );

  it('is the schema as check-jsonschema 0.39.0 ships it (unchanged)', () => {
    expect(createHash('sha256').update(schemaText).digest('hex')).toBe(
      'd549057ebc2925f39f62799eab0db7b9e2c18b35b6c00595199116da3ed10e64',
    );
  });

  it('accepts docker-compose.yml', () => {
    const valid = validate(compose);
    expect(validate.errors ?? []).toEqual([]);
    expect(valid).toBe(true);
  });

  it('refuses what compose would refuse (an unknown depends_on condition, a misspelt key)', () => {
    const broken = structuredClone(compose);
    (broken.services.worker as Service).depends_on = { redis: { condition: 'service_ready' } };
    expect(validate(broken)).toBe(false);
    const misspelt = structuredClone(compose);
    (misspelt.services.api as Record<string, unknown>).healtcheck = { test: ['CMD', 'true'] };
    expect(validate(misspelt)).toBe(false);
  });
});

describe('the twin of npm run cluster', () => {
  it('runs the cluster’s Temporal server, admin-tools and web UI versions', () => {
    expect(service('temporal').image).toBe(`temporalio/server:${deployment.temporalServer}`);
    expect(service('temporal-schema').image).toBe(`temporalio/admin-tools:${deployment.adminTools}`);
    expect(service('temporal-namespace').image).toBe(`temporalio/admin-tools:${deployment.adminTools}`);
    expect(service('temporal-ui').image).toBe(`temporalio/ui:${deployment.temporalUi}`);
    // Admin-tools of the server's release: its sql tool carries that release's schema.
    expect(deployment.adminTools).toBe(deployment.temporalServer);
    for (const s of Object.values(compose.services)) expect(s.image ?? '').not.toMatch(/auto-setup/);
  });

  it('sets up the schemas and the namespace with the scripts the cluster runs, then the server and the apps wait', () => {
    const setup = './scripts/temporal-setup:/setup:ro';
    expect(service('temporal-schema')).toMatchObject({ command: ['/setup/schema.sh'], volumes: [setup] });
    expect(service('temporal-namespace')).toMatchObject({ command: ['/setup/namespace.sh'], volumes: [setup] });
    for (const script of ['schema.sh', 'namespace.sh']) {
      expect(existsSync(path.join(root, 'scripts', 'temporal-setup', script))).toBe(true);
    }
    const cluster = readFileSync(path.join(root, 'scripts', 'cluster.ts'), 'utf8');
    expect(cluster).toContain("'schema.sh'");
    expect(cluster).toContain("'namespace.sh'");
    expect(service('temporal-schema').environment).toMatchObject({ SQL_PLUGIN: 'postgres12', SQL_HOST: 'postgresql' });
    expect(service('temporal-namespace').environment).toMatchObject({
      TEMPORAL_ADDRESS: 'temporal:7233',
      NAMESPACE: deployment.namespace,
      NAMESPACE_RETENTION: deployment.namespaceRetention,
    });
    // Every variable a job sets is one its script (or the tool it runs, as the script's header says) reads.
    for (const [job, script] of [
      ['temporal-schema', 'schema.sh'],
      ['temporal-namespace', 'namespace.sh'],
    ] as const) {
      const text = readFileSync(path.join(root, 'scripts', 'temporal-setup', script), 'utf8');
      const unread = Object.keys(service(job).environment ?? {}).filter((v) => !new RegExp(`\\b${v}\\b`).test(text));
      expect({ job, unread }).toEqual({ job, unread: [] });
    }
    const attributes = (service('temporal-namespace').environment?.SEARCH_ATTRIBUTES ?? '').split(' ').sort();
    expect(attributes).toEqual(paymentSearchAttributes.map((a) => `${a.name}=${cliAttributeType(a.type)}`).sort());
  });

  it('gives the server the cluster’s shards and dynamic config', () => {
    const temporal = service('temporal');
    expect(temporal.environment).toMatchObject({
      DB: 'postgres12',
      POSTGRES_SEEDS: 'postgresql',
      NUM_HISTORY_SHARDS: String(deployment.numHistoryShards),
    });
    const [mounted] = temporal.configs ?? [];
    expect(temporal.environment?.DYNAMIC_CONFIG_FILE_PATH).toBe(mounted?.target);
    const content = compose.configs?.[mounted?.source ?? '']?.content ?? '';
    expect(parse(content)).toEqual(JSON.parse(JSON.stringify(clusterDynamicConfig({}))));
  });

  it('runs as many workers and APIs as the cluster, each API on its own published port', () => {
    expect(service('worker').deploy?.replicas).toBe(deployment.workers);
    expect(service('api').deploy?.replicas).toBe(deployment.apis);
    const [published] = service('api').ports ?? [];
    const range = /^127\.0\.0\.1:(\d+)-(\d+):3000$/.exec(published ?? '');
    expect(range).not.toBeNull();
    expect(Number(range?.[2]) - Number(range?.[1]) + 1).toBe(deployment.apis);
  });
});

describe('start order and health', () => {
  const waitsFor = (name: string) =>
    Object.fromEntries(Object.entries(service(name).depends_on ?? {}).map(([k, v]) => [k, v.condition]));

  it('waits on healthchecks and on one-shot jobs that completed', () => {
    expect(waitsFor('temporal-schema')).toEqual({ postgresql: 'service_healthy' });
    expect(waitsFor('temporal')).toEqual({ 'temporal-schema': 'service_completed_successfully' });
    expect(waitsFor('temporal-namespace')).toEqual({ temporal: 'service_healthy' });
    expect(waitsFor('temporal-ui')).toEqual({ 'temporal-namespace': 'service_completed_successfully' });
    expect(waitsFor('simulator-setup')).toEqual({ simulator: 'service_healthy' });
    // The wallets' database (`payments`, beside Temporal's) exists before a worker or an API migrates it.
    expect(waitsFor('payments-db-setup')).toEqual({ postgresql: 'service_healthy' });
    expect(waitsFor('worker')).toEqual({
      'temporal-namespace': 'service_completed_successfully',
      'payments-db-setup': 'service_completed_successfully',
      simulator: 'service_healthy',
      // A worker never waits for Redis: it starts on its in-process breaker and switches over.
      redis: 'service_started',
    });
    expect(waitsFor('api')).toEqual({
      'temporal-namespace': 'service_completed_successfully',
      'payments-db-setup': 'service_completed_successfully',
      'simulator-setup': 'service_completed_successfully',
    });
    // Every service something waits on as healthy has a healthcheck; one-shot jobs are not restarted once done.
    for (const s of Object.values(compose.services)) {
      for (const [dep, { condition }] of Object.entries(s.depends_on ?? {})) {
        if (condition === 'service_healthy') expect(service(dep).healthcheck?.test.length).toBeGreaterThan(0);
        if (condition === 'service_completed_successfully') expect(service(dep).restart).toMatch(/^(no|on-failure)/);
      }
    }
    for (const name of ['postgresql', 'temporal', 'temporal-ui', 'simulator', 'redis', 'worker', 'api']) {
      expect(service(name).healthcheck?.test.length).toBeGreaterThan(0);
    }
  });

  it('publishes ports on loopback only', () => {
    for (const s of Object.values(compose.services)) {
      for (const port of s.ports ?? []) expect(port).toMatch(/^127\.0\.0\.1:/);
    }
  });
});

describe('our containers', () => {
  it('run files the image builds: dist/<x>.js from src/<x>.ts, and the prebuilt workflow bundle', () => {
    for (const name of ['simulator', 'worker', 'api']) {
      const [node, file] = service(name).command as string[];
      expect(node).toBe('node');
      const source = path.join(root, 'src', (file as string).replace(/^dist\//, '').replace(/\.js$/, '.ts'));
      expect(existsSync(source)).toBe(true);
    }
    expect(service('worker').environment?.WORKFLOW_BUNDLE_PATH).toBe('/app/dist/workflow-bundle.js');
    for (const script of dockerfile.matchAll(/npm run ([\w:-]+)/g)) {
      expect(pkg.scripts[script[1] as string]).toBeDefined();
    }
  });

  it('set only environment names our code reads: src/config/ for the product, src/simulator/env.ts for the simulator', () => {
    for (const name of productServices) {
      const unknown = Object.keys(service(name).environment ?? {}).filter((v) => !readsVariable(v));
      expect({ service: name, unknown }).toEqual({ service: name, unknown: [] });
    }
    const simulatorReads = Object.keys(SimulatorEnv.shape);
    expect(Object.keys(service('simulator').environment ?? {}).filter((v) => !simulatorReads.includes(v))).toEqual([]);
    // And the check can fail: a name nothing reads is caught.
    expect(readsVariable('WORKER_METRICS_ADRESS')).toBe(false);
    expect(readsVariable('PROVIDER_SIMULATOR_MAX_CONCURRENCY')).toBe(true);
  });

  it('give the product an environment our config accepts in production mode', () => {
    for (const name of productServices) {
      const env = envOf(name);
      expect(env.NODE_ENV).toBe('production');
      const config = loadConfig({ ...env, ...productionSecrets });
      expect(config.TEMPORAL_ADDRESS).toBe('temporal:7233');
      expect(config.usingDevelopmentSecrets).toBe(false);
    }
    expect(SimulatorEnv.parse(envOf('simulator'))).toMatchObject({ SIMULATOR_HOST: '0.0.0.0', SIMULATOR_PORT: 4010 });
    // The workers' slots fit their retry budgets: a production worker that did not would refuse to start.
    const worker = loadConfig({ ...envOf('worker'), ...productionSecrets });
    expect(() => checkWorkerCapacity(worker, pino({ level: 'silent' }))).not.toThrow();
  });

  it('give the workers the shared breaker store: a Redis service without persistence, REDIS_URL pointing at it', () => {
    const redis = service('redis');
    expect(redis.image).toMatch(/^redis:7-alpine$/);
    expect(redis.command).toEqual(['redis-server', '--save', '', '--appendonly', 'no']);
    expect(redis.volumes ?? []).toEqual([]);
    expect(loadConfig({ ...envOf('worker'), ...productionSecrets }).REDIS_URL).toBe('redis://redis:6379');
  });
});
