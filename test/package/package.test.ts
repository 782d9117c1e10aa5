/**
 * The package an order service imports: `npm pack` (its prepack builds the JavaScript, the .d.ts and the workflow
 * bundle), the tarball installed into a fresh project outside the repository, that project type-checked against the
 * package's .d.ts, and from there a payment started with the package's client against workers built by the package's
 * worker entry, on the run's dev server, with the simulator over HTTP.
 *
 * The install is npm's own (`npm install <tarball>`, the consumer's package.json, extraneous packages pruned), seeded
 * with hard links to the repository's node_modules so it extracts nothing it already has (see seedNodeModules).
 */
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  realpathSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { builtinModules } from 'node:module';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import pg from 'pg';
import ts from 'typescript';
import { chargeWorkflowId } from '../../src/domain/ids';
import { sweepScheduleId } from '../../src/domain/sweep';
import type { PaymentView } from '../../src/domain/payment';
import { type RunningSimulator, startSimulator } from '../../src/simulator/server';
import { createTestDatabase } from '../helpers/database';
import { DEV_SERVER_ADDRESS_ENV, connectDevServer } from '../helpers/servers';

const root = path.resolve(__dirname, '..', '..');
const fixture = path.join(__dirname, 'order-service');
const pkg = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as {
  name: string;
  version: string;
  exports: Record<string, unknown>;
  dependencies: Record<string, string>;
  peerDependencies: Record<string, string>;
};
/** The entries the issue names; each must resolve, load and type-check from the consumer. */
const entries = ['client', 'worker', 'database', 'workflows', 'domain'] as const;

/** Bounds: a cold CI run builds everything and may fetch metadata from the registry; a warm one takes seconds. */
const PACK_TIMEOUT_MS = 240_000;
const INSTALL_TIMEOUT_MS = 180_000;
const STEP_TIMEOUT_MS = 120_000;

/** Runs a command; rejects with its output when it fails or outlasts `timeoutMs`. */
function run(
  file: string,
  args: readonly string[],
  options: { cwd: string; timeoutMs: number; env?: NodeJS.ProcessEnv },
): Promise<string> {
  return new Promise((resolve, reject) =>
    execFile(
      file,
      args,
      { cwd: options.cwd, env: options.env ?? npmEnv(), timeout: options.timeoutMs, maxBuffer: 64 * 1024 * 1024 },
      (err, stdout, stderr) =>
        err
          ? reject(
              new Error(
                `${path.basename(file)} ${args.join(' ')} (in ${options.cwd}): ${err.message}\n${stdout}\n${stderr}`,
              ),
            )
          : resolve(stdout),
    ),
  );
}

/**
 * The environment without what an outer `npm test` sets for its own script: `npm_config_local_prefix` would make the
 * consumer's `npm install` install into this repository.
 */
function npmEnv(): NodeJS.ProcessEnv {
  return Object.fromEntries(
    Object.entries(process.env).filter(
      ([k]) => !/^(npm_config_local_prefix|npm_lifecycle_.*|npm_package_.*|npm_command|INIT_CWD)$/i.test(k),
    ),
  );
}

/** What `npm pack --json` reports of the tarball. */
interface Packed {
  readonly filename: string;
  readonly size: number;
  readonly unpackedSize: number;
  readonly files: readonly { readonly path: string; readonly size: number }[];
}

/** `npm pack` of the repository into `dir`: its prepack (`npm run build:package`) runs first. */
async function pack(dir: string): Promise<Packed> {
  const stdout = await run('npm', ['pack', '--json', '--pack-destination', dir], {
    cwd: root,
    timeoutMs: PACK_TIMEOUT_MS,
  });
  // The prepack's output comes first on stdout; the report is the JSON array that ends it.
  const report = JSON.parse(stdout.slice(stdout.lastIndexOf('\n[\n') + 1)) as Packed[];
  const packed = report[0];
  if (packed === undefined) throw new Error(`npm pack reported nothing:\n${stdout}`);
  return packed;
}

/**
 * Hard links to the repository's node_modules (same versions as its lockfile): `npm install` then keeps what matches
 * the consumer's tree and prunes the rest, instead of extracting ~300 MB from the cache (45 s here). Where hard links
 * cannot be made (another file system) the install starts empty and npm fetches everything. A node_modules that is a
 * symbolic link (a git worktree sharing another checkout's) is copied from where it points: a copy of the link would
 * let the install below work in, and prune, the other checkout's tree.
 */
async function seedNodeModules(project: string): Promise<void> {
  try {
    await run('cp', ['-al', realpathSync(path.join(root, 'node_modules')), path.join(project, 'node_modules')], {
      cwd: project,
      timeoutMs: STEP_TIMEOUT_MS,
    });
    // The repository's record of its own tree: npm must read the consumer's as it is.
    rmSync(path.join(project, 'node_modules', '.package-lock.json'), { force: true });
  } catch {
    rmSync(path.join(project, 'node_modules'), { recursive: true, force: true });
  }
}

/** A fresh order-service project outside the repository (nothing above it resolves a module), not installed yet. */
async function consumerProject(dir: string): Promise<string> {
  const project = path.join(dir, 'order-service');
  mkdirSync(project);
  for (const file of readdirSync(fixture)) copyFileSync(path.join(fixture, file), path.join(project, file));
  const typesNode = (
    JSON.parse(readFileSync(path.join(root, 'node_modules/@types/node/package.json'), 'utf8')) as { version: string }
  ).version;
  writeFileSync(
    path.join(project, 'package.json'),
    JSON.stringify({
      name: 'order-service',
      version: '1.0.0',
      private: true,
      // What the order service imports itself; payment-workflows brings the rest.
      dependencies: {
        '@temporalio/client': pkg.peerDependencies['@temporalio/client'],
        '@temporalio/worker': pkg.peerDependencies['@temporalio/worker'],
        '@types/node': typesNode,
      },
    }),
  );
  await seedNodeModules(project);
  return project;
}

/** The tarball installed into the consumer's project. */
async function installInto(project: string, tarball: string): Promise<void> {
  await run('npm', ['install', tarball, '--prefer-offline', '--no-audit', '--no-fund'], {
    cwd: project,
    timeoutMs: INSTALL_TIMEOUT_MS,
  });
}

/** The modules a built file loads or a .d.ts imports, by TypeScript's own scanner (never from a comment). */
const importsOf = (source: string): string[] =>
  ts.preProcessFile(source, true, true).importedFiles.map((f) => f.fileName);

/** The package a bare specifier names (`@scope/name/sub` -> `@scope/name`). */
const packageOf = (spec: string): string =>
  spec
    .split('/')
    .slice(0, spec.startsWith('@') ? 2 : 1)
    .join('/');

/** Whether a relative import of `file` (in `dir`) finds a file the package ships, as Node or TypeScript would. */
const shipped = (dir: string, file: string, spec: string): boolean => {
  const target = path.join(dir, path.dirname(file), spec);
  const candidates = file.endsWith('.d.ts') ? ['.d.ts', '/index.d.ts'] : ['.js', '/index.js', ''];
  return candidates.some((c) => existsSync(`${target}${c}`) && statSync(`${target}${c}`).isFile());
};

/** Every file under `dir`, relative to it. */
function filesUnder(dir: string, prefix = ''): string[] {
  return readdirSync(path.join(dir, prefix), { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? filesUnder(dir, path.join(prefix, e.name)) : [path.join(prefix, e.name)],
  );
}

describe('payment-workflows as a package an order service imports', () => {
  let tmp: string;
  let packed: Packed;
  let project: string;
  let installed: string;

  beforeAll(async () => {
    expect(existsSync(path.join(os.tmpdir(), 'node_modules'))).toBe(false); // nothing above the consumer resolves
    tmp = mkdtempSync(path.join(os.tmpdir(), 'pw-package-'));
    // The consumer's project is laid out while the package is packed (its build takes most of that time).
    [packed, project] = await Promise.all([pack(tmp), consumerProject(tmp)]);
    await installInto(project, path.join(tmp, packed.filename));
    installed = path.join(project, 'node_modules', pkg.name);
  }, PACK_TIMEOUT_MS + INSTALL_TIMEOUT_MS);

  afterAll(() => {
    if (tmp) rmSync(tmp, { recursive: true, force: true });
  });

  it('ships the built entries with their .d.ts and the prebuilt workflow bundle, and no source, test, bench or script', () => {
    const files = packed.files.map((f) => f.path);
    for (const entry of entries) {
      expect(files).toContain(`dist/package/${entry}.js`);
      expect(files).toContain(`dist/package/${entry}.d.ts`);
    }
    expect(files).toContain('dist/workflow-bundle.js');
    // The wallets' SQL migrations the worker applies at start (tsc copies only TypeScript; the build copies them).
    expect(files).toContain('dist/db/migrations/0001_wallets.sql');
    expect(files).toContain('CHANGELOG.md');
    expect(files.filter((f) => /^(src|test|bench|scripts|docs|\.ci|\.temporal)\//.test(f))).toEqual([]);
    expect(files.filter((f) => /\.ts$/.test(f) && !f.endsWith('.d.ts'))).toEqual([]);
    expect(files.filter((f) => /^dist\/simulator\/|\.map$|tsbuildinfo/.test(f))).toEqual([]);
  });

  it('ships every module its built code and .d.ts import, and declares every package they import', () => {
    const declared = new Set([pkg.name, ...Object.keys(pkg.dependencies), ...Object.keys(pkg.peerDependencies)]);
    const dist = path.join(installed, 'dist');
    const built = filesUnder(dist).filter(
      (f) => (f.endsWith('.js') || f.endsWith('.d.ts')) && f !== 'workflow-bundle.js',
    );
    const missing: string[] = [];
    const undeclared = new Set<string>();
    for (const file of built) {
      for (const spec of importsOf(readFileSync(path.join(dist, file), 'utf8'))) {
        if (spec.startsWith('.')) {
          if (!shipped(dist, file, spec)) missing.push(`${file} -> ${spec}`);
        } else if (!spec.startsWith('node:') && !builtinModules.includes(spec) && !declared.has(packageOf(spec))) {
          undeclared.add(packageOf(spec));
        }
      }
    }
    expect(built.length).toBeGreaterThan(100); // the check is not vacuous
    expect(missing).toEqual([]);
    expect([...undeclared].sort()).toEqual([]);
  });

  it(
    'resolves and loads every entry of the exports map in the installed package',
    async () => {
      const script = `
      const entries = ${JSON.stringify(entries)};
      const out = Object.fromEntries(entries.map((e) => [e, Object.keys(require('${pkg.name}/' + e)).sort()]));
      out.bundle = require('fs').statSync(require.resolve('${pkg.name}/workflow-bundle')).size;
      console.log(JSON.stringify(out));
    `;
      const loaded = JSON.parse(
        await run(process.execPath, ['-e', script], { cwd: project, timeoutMs: STEP_TIMEOUT_MS }),
      ) as Record<string, unknown>;
      expect(loaded.client).toEqual(
        expect.arrayContaining(['PaymentsClient', 'AesGcmPayloadCodec', 'PaymentInFlight']),
      );
      expect(loaded.worker).toEqual(
        expect.arrayContaining(['createPaymentWorkers', 'createProvider', 'simulatorCapabilities', 'StripeProvider']),
      );
      expect(loaded.workflows).toEqual(
        expect.arrayContaining(['chargeWorkflow', 'captureWorkflow', 'refundWorkflow', 'reconcileWorkflow']),
      );
      expect(loaded.database).toEqual(
        expect.arrayContaining(['openPaymentDatabase', 'WalletLedger', 'KeyRecords', 'OrderClaims', 'WalletError']),
      );
      expect(loaded.domain).toEqual(
        expect.arrayContaining(['ChargeRequest', 'PaymentStatus', 'defaultPaymentTimings']),
      );
      expect(loaded.bundle).toBeGreaterThan(100_000);
      expect(Object.keys(pkg.exports).sort()).toEqual(
        [...entries.map((e) => `./${e}`), './workflow-bundle', './package.json'].sort(),
      );
    },
    STEP_TIMEOUT_MS,
  );

  it(
    "type-checks the order service's code against the package's .d.ts",
    async () => {
      // The repository's TypeScript, the consumer's tsconfig (node16 resolution: the exports map's `types`).
      await run(process.execPath, [path.join(root, 'node_modules/typescript/bin/tsc'), '-p', project], {
        cwd: project,
        timeoutMs: STEP_TIMEOUT_MS,
      });
      expect(existsSync(path.join(project, 'out', 'order-service.js'))).toBe(true);
      expect(existsSync(path.join(project, 'out', 'order-service-with-database.js'))).toBe(true);
    },
    STEP_TIMEOUT_MS,
  );

  describe('on the dev server, with the simulator over HTTP', () => {
    let env: TestWorkflowEnvironment;
    let sim: RunningSimulator;

    beforeAll(async () => {
      env = await connectDevServer();
      sim = await startSimulator({ port: 0 });
    });

    afterAll(async () => {
      await sim?.close();
      await env?.teardown();
    });

    /** The payments listen for late webhooks a while, and the schedule runs every 10 min: neither outlives a test. */
    async function leaveNothing(taskQueue: string, merchantId: string, keys: readonly string[]): Promise<void> {
      for (const key of keys) {
        await env.client.workflow
          .getHandle(chargeWorkflowId(merchantId, key))
          .terminate('test over')
          .catch(() => undefined);
      }
      await env.client.schedule
        .getHandle(sweepScheduleId(taskQueue))
        .delete()
        .catch(() => undefined);
    }

    it(
      "starts a payment with the package's client against the package's workers, in the order service's process",
      async () => {
        const taskQueue = `package-${randomUUID()}`;
        const apiKey = `sk_test_${randomUUID()}`;
        const merchantId = `m_${randomUUID().slice(0, 8)}`;
        const orderId = `order-${randomUUID()}`;
        const key = `key_${randomUUID()}`;
        await sim.setMerchant(apiKey, { idempotency: true, key_ttl_s: 86_400 });
        const stdout = await run(process.execPath, [path.join(project, 'out', 'order-service.js')], {
          cwd: project,
          timeoutMs: STEP_TIMEOUT_MS,
          env: {
            ...npmEnv(),
            TEMPORAL_ADDRESS: process.env[DEV_SERVER_ADDRESS_ENV],
            TASK_QUEUE: taskQueue,
            SIMULATOR_URL: sim.url,
            PROVIDER_API_KEY: apiKey,
            MERCHANT_ID: merchantId,
            ORDER_ID: orderId,
            PAYMENT_KEY: key,
          },
        });
        try {
          const printed = JSON.parse(stdout.trim().split('\n').at(-1) ?? '') as {
            sweep: { scheduleId: string; outcome: string };
            payment: PaymentView;
          };
          expect(printed.payment).toMatchObject({
            key,
            merchantId,
            orderId,
            status: 'succeeded',
            amount: { value: 1250, currency: 'EUR' },
            provider: 'simulator',
          });
          expect(printed.sweep).toEqual({ scheduleId: sweepScheduleId(taskQueue), outcome: 'created' });
          // One charge at the provider, the one the printed view names.
          const ledger = (await (await fetch(`${sim.url}/_sim/ledger?api_key=${apiKey}`)).json()) as {
            effects: { operation: string; reference: string; payment_id: string }[];
          };
          const created = ledger.effects.filter((e) => e.operation === 'create');
          expect(created).toHaveLength(1);
          expect(created[0]).toMatchObject({ reference: orderId, payment_id: printed.payment.providerPaymentId });
        } finally {
          await leaveNothing(taskQueue, merchantId, [key]);
        }
      },
      STEP_TIMEOUT_MS,
    );

    it(
      "with the package's database: a split payment and a declined wallet-only one on the service's wallet, the key kept",
      async () => {
        const db = await createTestDatabase();
        const taskQueue = `package-db-${randomUUID()}`;
        const apiKey = `sk_test_${randomUUID()}`;
        const merchantId = `m_${randomUUID().slice(0, 8)}`;
        const [orderId, secondOrderId] = [`order-${randomUUID()}`, `order-${randomUUID()}`];
        const [key, secondKey] = [`key_${randomUUID()}`, `key_${randomUUID()}`];
        const walletId = `w_${randomUUID().slice(0, 8)}`;
        await sim.setMerchant(apiKey, { idempotency: true, key_ttl_s: 86_400 });
        try {
          const stdout = await run(process.execPath, [path.join(project, 'out', 'order-service-with-database.js')], {
            cwd: project,
            timeoutMs: STEP_TIMEOUT_MS,
            env: {
              ...npmEnv(),
              DATABASE_URL: db.url,
              TEMPORAL_ADDRESS: process.env[DEV_SERVER_ADDRESS_ENV],
              TASK_QUEUE: taskQueue,
              SIMULATOR_URL: sim.url,
              PROVIDER_API_KEY: apiKey,
              MERCHANT_ID: merchantId,
              WALLET_ID: walletId,
              CREDIT_KEY: `credit_${randomUUID()}`,
              ORDER_ID: orderId,
              PAYMENT_KEY: key,
              SECOND_ORDER_ID: secondOrderId,
              SECOND_PAYMENT_KEY: secondKey,
            },
          });
          const printed = JSON.parse(stdout.trim().split('\n').at(-1) ?? '') as {
            split: PaymentView;
            walletOnly: PaymentView;
            wallet: { balance: number; held: number; available: number; currency: string };
            keyRecord?: { view: PaymentView };
          };
          expect(printed.split).toMatchObject({
            key,
            status: 'succeeded',
            amount: { value: 1250, currency: 'EUR' },
            wallet: { walletId, amount: 500, status: 'captured' },
          });
          expect(printed.walletOnly).toMatchObject({ status: 'declined', declineCode: 'wallet_insufficient_funds' });
          expect(printed.wallet).toMatchObject({ balance: 300, held: 0, available: 300, currency: 'EUR' });
          expect(printed.keyRecord?.view).toMatchObject({ key, status: 'succeeded' });
          // The card was charged the rest, once; the wallet-only payment sent nothing.
          const ledger = (await (await fetch(`${sim.url}/_sim/ledger?api_key=${apiKey}`)).json()) as {
            effects: { operation: string; reference: string; amount: number }[];
          };
          expect(ledger.effects.filter((e) => e.operation === 'create')).toEqual([
            expect.objectContaining({ reference: orderId, amount: 750 }),
          ]);
          // In the service's database, migrated by its open: the credit, the split's hold and its capture, and the
          // wallet-only payment's decline recorded as a release of 0 (a late debit of its key is refused).
          const client = new pg.Client({ connectionString: db.url });
          await client.connect();
          try {
            const { rows } = await client.query<{ kind: string; amount: string; payment_key: string | null }>(
              'SELECT kind, amount, payment_key FROM wallet_entries WHERE merchant_id = $1 AND wallet_id = $2 ORDER BY seq',
              [merchantId, walletId],
            );
            expect(rows.map((r) => [r.kind, Number(r.amount), r.payment_key])).toEqual([
              ['credit', 800, null],
              ['hold', 500, key],
              ['capture', 500, key],
              ['release', 0, secondKey],
            ]);
          } finally {
            await client.end();
          }
        } finally {
          await leaveNothing(taskQueue, merchantId, [key, secondKey]);
          await db.drop();
        }
      },
      STEP_TIMEOUT_MS,
    );
  });
});
