/**
 * docker-compose.yml and the Dockerfile cannot run here (no Docker engine), so they are checked statically: every
 * service is there, every command points at a file the image builds, every app environment is accepted by our own
 * config parser in production mode, and the search attributes registered are the ones the workflows use.
 */
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { parse } from 'yaml';
import { loadConfig } from '../../src/config';
import { paymentSearchAttributes } from '../../src/domain/search-attributes';

const root = path.resolve(__dirname, '..', '..');
const compose = parse(readFileSync(path.join(root, 'docker-compose.yml'), 'utf8'), { merge: true }) as {
  services: Record<
    string,
    {
      image?: string;
      command?: string[] | string;
      environment?: Record<string, string>;
      ports?: string[];
      volumes?: string[];
      depends_on?: Record<string, { condition: string }>;
    }
  >;
};
const dockerfile = readFileSync(path.join(root, 'Dockerfile'), 'utf8');
const pkg = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
const appServices = ['simulator', 'worker', 'api'] as const;

/** `${VAR:?message}` as docker compose would substitute it when the user set VAR. */
const substitute = (value: string) => value.replace(/\$\{(\w+):\?[^}]*\}/g, (_m, name: string) => `set-${name}`);

it('has the production services', () => {
  expect(Object.keys(compose.services).sort()).toEqual(
    [
      'api',
      'payments-db-setup',
      'postgresql',
      'redis',
      'simulator',
      'simulator-setup',
      'temporal',
      'temporal-setup',
      'temporal-ui',
      'worker',
    ].sort(),
  );
});

it('runs files the image builds: dist/<x>.js from src/<x>.ts, and the prebuilt workflow bundle', () => {
  for (const name of appServices) {
    const command = compose.services[name]?.command;
    expect(Array.isArray(command)).toBe(true);
    const [node, file] = command as string[];
    expect(node).toBe('node');
    const source = path.join(root, 'src', (file as string).replace(/^dist\//, '').replace(/\.js$/, '.ts'));
    expect(existsSync(source)).toBe(true);
  }
  expect(compose.services.worker?.environment?.WORKFLOW_BUNDLE_PATH).toBe('/app/dist/workflow-bundle.js');
  for (const script of dockerfile.matchAll(/npm run ([\w:-]+)/g))
    expect(pkg.scripts[script[1] as string]).toBeDefined();
});

it('gives every app service an environment our config accepts in production mode', () => {
  for (const name of appServices) {
    const env = Object.fromEntries(
      Object.entries(compose.services[name]?.environment ?? {}).map(([k, v]) => [k, substitute(String(v))]),
    );
    expect(env.NODE_ENV).toBe('production');
    const config = loadConfig({
      ...env,
      API_TOKENS: 'm1:token-of-merchant-one',
      OPERATOR_TOKENS: 'ops:token-of-the-operators',
      PAYLOAD_KEYS: `k1:${Buffer.alloc(32, 7).toString('base64')}`,
    });
    expect(config.TEMPORAL_ADDRESS).toBe('temporal:7233');
    expect(config.usingDevelopmentSecrets).toBe(false);
  }
});

it('publishes ports on loopback only and registers exactly the payment search attributes', () => {
  for (const service of Object.values(compose.services)) {
    for (const port of service.ports ?? []) expect(port).toMatch(/^127\.0\.0\.1:/);
  }
  const setup = JSON.stringify(compose.services['temporal-setup']?.command);
  const registered = [...setup.matchAll(/--name (\w+) --type (\w+)/g)].map((m) => `${m[1]} ${m[2]?.toUpperCase()}`);
  expect(registered.sort()).toEqual(paymentSearchAttributes.map((k) => `${k.name} ${k.type}`).sort());
});

it('gives the worker the shared breaker store: a Redis service without persistence, REDIS_URL pointing at it', () => {
  const redis = compose.services.redis;
  expect(redis?.image).toMatch(/^redis:7-alpine$/);
  expect(redis?.command).toEqual(['redis-server', '--save', '', '--appendonly', 'no']);
  expect(redis?.volumes ?? []).toEqual([]);
  const worker = compose.services.worker;
  expect(worker?.environment?.REDIS_URL).toBe('redis://redis:6379');
  expect(worker?.depends_on?.redis).toBeDefined();
  const env = Object.fromEntries(Object.entries(worker?.environment ?? {}).map(([k, v]) => [k, substitute(String(v))]));
  expect(
    loadConfig({
      ...env,
      API_TOKENS: 'm1:token-of-merchant-one',
      OPERATOR_TOKENS: 'ops:token-of-the-operators',
      PAYLOAD_KEYS: `k1:${Buffer.alloc(32, 7).toString('base64')}`,
    }).REDIS_URL,
  ).toBe('redis://redis:6379');
});

it("gives the worker and the API the payments database, apart from Temporal's, created before they start", () => {
  for (const name of ['worker', 'api'] as const) {
    const service = compose.services[name];
    expect(service?.environment?.DATABASE_URL).toBe('postgres://temporal:temporal@postgresql:5432/payments');
    expect(service?.depends_on?.['payments-db-setup']).toEqual({ condition: 'service_completed_successfully' });
  }
  expect(JSON.stringify(compose.services['payments-db-setup']?.command)).toContain('CREATE DATABASE payments');
  expect(dockerfile).toContain('COPY --from=build /app/src/db/migrations ./dist/db/migrations');
});
