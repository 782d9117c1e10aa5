/**
 * A second worker process for multi-process tests (the SDK allows one worker per task queue per process): the real
 * `createBreaker` and the worker stack of src/stack.ts, configured by the JSON in PW_WORKER_SPEC. Prints `ready` once
 * polling, drains on SIGTERM, then prints `{"creates":N}`: how many creates this process sent to the provider. Its
 * pino log (level `logLevel`, default silent) goes to stderr, which `spawnWorkerProcess` collects. A test may also
 * SIGKILL it (a worker that dies mid-task, with whatever it was sending).
 */
import { spawn } from 'node:child_process';
import { DefaultLogger, NativeConnection, Runtime } from '@temporalio/worker';
import pino, { type Logger } from 'pino';
import { createProvider, simulatorCapabilities } from '../../src/providers';
import type { RestProvider } from '../../src/providers/rest/adapter';
import type { PaymentProvider } from '../../src/providers/types';
import { createBreaker, startStack } from '../../src/stack';
import type { BreakerOptions } from '../../src/breaker';
import type { RetryOverrides } from '../../src/domain/retry';
import { createPool } from '../../src/db';
import { MerchantEventOutbox, type MerchantWebhookSettings } from '../../src/merchant-webhooks';
import { Context } from '@temporalio/activity';
import type { Pool } from 'pg';
import { type KeyRecord, KeyRecords, type NewKeyRecord } from '../../src/key-records';
import { type HoldArgs, type HoldResult, type SettleArgs, type SettleResult, WalletLedger } from '../../src/wallets';
import { inLocalActivity } from './local-activity';

export interface WorkerProcessSpec {
  readonly temporalAddress: string;
  readonly taskQueue: string;
  readonly workflowBundlePath: string;
  readonly simulatorUrl: string;
  readonly apiKey: string;
  /** The shared breaker store; absent: the process's own in-process breaker. */
  readonly redisUrl?: string;
  readonly keyPrefix?: string;
  readonly breaker: Required<
    Pick<BreakerOptions, 'failureThreshold' | 'window' | 'cooldownMs' | 'probeTimeoutMs' | 'jitterMs'>
  >;
  /** pino level of the process's log, written to stderr as JSON lines. Default: silent. */
  readonly logLevel?: string;
  /**
   * The worker's provider settings (`PROVIDER_CONNECT_TIMEOUT_MS`, `PROVIDER_TOTAL_TIMEOUT_MS`, `PROVIDER_KEY_TTL_S`):
   * two processes with different ones are a fleet in the middle of a rolling deploy. Defaults 1000, 2000, 86400.
   */
  readonly provider?: {
    readonly connectTimeoutMs?: number;
    readonly totalTimeoutMs?: number;
    readonly keyTtlS?: number;
  };
  /** The worker's retry presets (`RETRY_*`); default the production presets. */
  readonly retry?: RetryOverrides;
  /** Deliver merchant webhooks from this database's queue (migrated already), with these settings. */
  readonly merchantWebhooks?: { readonly databaseUrl: string; readonly settings: MerchantWebhookSettings };
  /** The wallet ledger's database (migrated already), as `DATABASE_URL` gives it to a worker: wallet activities run. */
  readonly walletsDatabaseUrl?: string;
  /** With `walletsDatabaseUrl`: payments' key answers are kept in its `key_records`, as a worker with a database does. */
  readonly keyRecords?: boolean;
  /**
   * With `keyRecords` and `merchantWebhooks`: the process SIGKILLs itself inside the first local activity that records
   * a key answer, once that answer and its payment's event are both committed: a workflow task whose news was handed
   * over inside it, never completed.
   */
  readonly dieAfterNewsInTask?: boolean;
  /**
   * With `walletsDatabaseUrl`: the process SIGKILLs itself inside a split payment's first step (a local activity),
   * right after its hold committed, after the provider answered its create, or after its settlement committed: the
   * step's work is done in part or whole, and Temporal never hears of it.
   */
  readonly dieInFirstStep?: 'after-hold' | 'after-create' | 'after-settle';
}

/** A worker process's breaker that never opens: a test whose worker must send whatever happens to the provider. */
export const NEVER_OPENING_BREAKER: WorkerProcessSpec['breaker'] = {
  failureThreshold: Number.MAX_SAFE_INTEGER,
  window: { durationMs: 60_000, failureRate: 1, minimumCalls: Number.MAX_SAFE_INTEGER },
  cooldownMs: 30_000,
  probeTimeoutMs: 30_000,
  jitterMs: 0,
};

export interface WorkerProcess {
  readonly pid: number;
  /** SIGTERM, waits for the drain; answers how many creates the process sent. Fails when it exited non-zero. */
  stop(): Promise<number>;
  /** SIGKILL: the process dies at once, mid-task (nothing drains); resolves once it exited. */
  kill(): Promise<void>;
  /** Resolves once the process exited by itself or was killed: the signal that ended it, if one did. */
  died(): Promise<NodeJS.Signals | null>;
  /** The process's log so far: one parsed pino line each. */
  logs(): { level: number; msg: string; [field: string]: unknown }[];
}

/** Spawns test/helpers/worker-process.ts with `spec` and resolves once it polls (bounded: 90 s). */
export async function spawnWorkerProcess(spec: WorkerProcessSpec): Promise<WorkerProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', __filename], {
    env: { ...process.env, PW_WORKER_SPEC: JSON.stringify(spec) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  // A test killed by its timeout must not leave the child polling.
  const killOnExit = () => child.kill('SIGKILL');
  process.once('exit', killOnExit);
  let out = '';
  let err = '';
  child.stderr.on('data', (c: Buffer) => (err += c.toString()));
  let signal: NodeJS.Signals | null = null;
  const exited = new Promise<number | null>((resolve) =>
    child.once('exit', (code, sig) => {
      process.off('exit', killOnExit);
      signal = sig;
      resolve(code);
    }),
  );
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('worker process not ready within 90 s')), 90_000);
    child.stdout.on('data', (c: Buffer) => {
      out += c.toString();
      if (out.includes('ready\n')) {
        clearTimeout(timer);
        resolve();
      }
    });
    void exited.then((code) => reject(new Error(`worker process exited ${code} before ready: ${err.slice(-2_000)}`)));
  });
  return {
    pid: child.pid as number,
    async kill() {
      child.kill('SIGKILL');
      await exited;
    },
    died: () => exited.then(() => signal),
    async stop() {
      child.kill('SIGTERM');
      const code = await exited;
      if (code !== 0) throw new Error(`worker process exited ${code}: ${err.slice(-2_000)}`);
      const line = out.split('\n').find((l) => l.includes('"creates"'));
      return (JSON.parse(line ?? '{}') as { creates: number }).creates;
    },
    logs: () =>
      err
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as { level: number; msg: string }),
  };
}

/** The simulator's adapter as the multi-process tests configure it, in this process and in the child. */
export const simulatorProvider = (
  baseUrl: string,
  apiKey: string,
  logger: Logger,
  settings: WorkerProcessSpec['provider'] = {},
): RestProvider =>
  createProvider({
    name: 'simulator',
    baseUrl,
    apiKey,
    capabilities: simulatorCapabilities(settings.keyTtlS ?? 86_400),
    connectTimeoutMs: settings.connectTimeoutMs ?? 1_000,
    totalTimeoutMs: settings.totalTimeoutMs ?? 2_000,
    logger,
  });

/** A provider that counts the creates it sent. */
export const counted = (provider: PaymentProvider, calls: { creates: number }): PaymentProvider =>
  new Proxy(provider, {
    get(target, prop) {
      const value: unknown = Reflect.get(target, prop, target);
      if (typeof value !== 'function') return value;
      return (...args: unknown[]) => {
        if (prop === 'createPayment') calls.creates += 1;
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });

/**
 * Key records whose first write from a local activity ends the process (SIGKILL) once the key's payment has its event
 * in the merchant queue too (the other half of the same handoff, polled: at most 10 s), before the activity returns.
 */
function dyingKeyRecords(pool: Pool): KeyRecords {
  return new (class extends KeyRecords {
    override async record<View>(r: NewKeyRecord<View>): Promise<KeyRecord<View>> {
      const recorded = await super.record(r);
      if (!Context.current().info.isLocal) return recorded;
      for (let i = 0; i < 100; i += 1) {
        const { rowCount } = await pool.query('SELECT 1 FROM merchant_webhook_events WHERE payment_key = $1', [r.key]);
        if (rowCount === 1) process.kill(process.pid, 'SIGKILL');
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      throw new Error(`no event for ${r.key}: the process stays alive`);
    }
  })(pool);
}

/** A ledger that SIGKILLs the process right after a local activity's hold or settlement committed, as `at` says. */
function dyingLedger(pool: Pool, at: WorkerProcessSpec['dieInFirstStep']): WalletLedger {
  const die = <T>(point: WorkerProcessSpec['dieInFirstStep'], result: T): T => {
    if (at === point && inLocalActivity()) process.kill(process.pid, 'SIGKILL');
    return result;
  };
  return new (class extends WalletLedger {
    override async hold(args: HoldArgs): Promise<HoldResult> {
      return die('after-hold', await super.hold(args));
    }
    override async capture(args: SettleArgs): Promise<SettleResult> {
      return die('after-settle', await super.capture(args));
    }
    override async release(args: SettleArgs): Promise<SettleResult> {
      return die('after-settle', await super.release(args));
    }
  })(pool);
}

/** A provider whose create, answered, SIGKILLs the process when it was sent from a local activity. */
const dyingAfterCreate = (provider: PaymentProvider): PaymentProvider =>
  new Proxy(provider, {
    get(target, prop) {
      const value: unknown = Reflect.get(target, prop, target);
      if (prop !== 'createPayment' || typeof value !== 'function') return value;
      return async (...args: unknown[]) => {
        const answered: unknown = await (value as (...a: unknown[]) => Promise<unknown>).apply(target, args);
        if (inLocalActivity()) process.kill(process.pid, 'SIGKILL');
        return answered;
      };
    },
  });

async function main() {
  const spec = JSON.parse(process.env.PW_WORKER_SPEC ?? '') as WorkerProcessSpec;
  Runtime.install({ logger: new DefaultLogger('WARN') });
  const logger = pino(
    { level: spec.logLevel ?? process.env.TEST_LOG_LEVEL ?? 'silent' },
    pino.destination({ dest: 2, sync: true }),
  );
  const breaker = await createBreaker(
    { REDIS_URL: spec.redisUrl, REDIS_KEY_PREFIX: spec.keyPrefix ?? 'pw:breaker:', breaker: spec.breaker },
    logger,
  );
  const provider = simulatorProvider(spec.simulatorUrl, spec.apiKey, logger, spec.provider);
  const calls = { creates: 0 };
  const connection = await NativeConnection.connect({ address: spec.temporalAddress });
  const pool = spec.merchantWebhooks && createPool({ url: spec.merchantWebhooks.databaseUrl });
  const walletPool = spec.walletsDatabaseUrl === undefined ? undefined : createPool({ url: spec.walletsDatabaseUrl });
  const stack = await startStack({
    logger,
    namespace: 'default',
    taskQueue: spec.taskQueue,
    nativeConnection: connection,
    workers: {
      providers: {
        simulator:
          spec.dieInFirstStep === 'after-create'
            ? dyingAfterCreate(counted(provider, calls))
            : counted(provider, calls),
      },
      workflows: { workflowBundle: { codePath: spec.workflowBundlePath } },
      breaker: breaker.breaker,
      ...(spec.retry === undefined ? {} : { retry: spec.retry }),
      ...(walletPool
        ? { wallets: spec.dieInFirstStep ? dyingLedger(walletPool, spec.dieInFirstStep) : new WalletLedger(walletPool) }
        : {}),
      ...(walletPool && spec.keyRecords
        ? { keyRecords: spec.dieAfterNewsInTask ? dyingKeyRecords(walletPool) : new KeyRecords(walletPool) }
        : {}),
      ...(pool && spec.merchantWebhooks
        ? { merchantWebhooks: { outbox: new MerchantEventOutbox(pool), settings: spec.merchantWebhooks.settings } }
        : {}),
      start: false,
    },
    closers: [
      () => breaker.close(),
      () => provider.close(),
      () => connection.close(),
      async () => void (await pool?.end()),
      async () => void (await walletPool?.end()),
    ],
  });
  const workers = await stack.createWorkers();
  process.once('SIGTERM', () => workers.forEach((w) => w.shutdown()));
  const running = stack.run();
  process.stdout.write('ready\n');
  await running;
  process.stdout.write(`${JSON.stringify(calls)}\n`);
  await stack.close();
}

if (require.main === module) {
  main().then(
    () => process.exit(0),
    (err: unknown) => {
      console.error(err);
      process.exit(1);
    },
  );
}
