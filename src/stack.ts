/**
 * The whole stack, wired in one place: the Temporal connections, the payload codec, the providers and
 * their activities, the workers (one workflow worker, one activity worker per provider task queue: bulkheads), the
 * client and the HTTP API. The worker and API processes build theirs from the configuration
 * ({@link startConfiguredStack}); the tests' helpers and the bench call {@link startStack} with parts of their own (a
 * test server's connections, providers pointed at a test simulator, test timings), so all of them run this wiring.
 *
 * The composition root: the one module that may import every layer (docs/architecture.md#layers).
 */
import type { AddressInfo } from 'node:net';
import { Client, Connection } from '@temporalio/client';
import type { DataConverter, PayloadCodec } from '@temporalio/common';
import { NativeConnection, type NativeConnectionOptions, Worker, type WorkerOptions } from '@temporalio/worker';
import type { FastifyInstance } from 'fastify';
import { Registry, collectDefaultMetrics } from 'prom-client';
import type { Logger as PinoLogger } from 'pino';
import { type Activities, createActivities } from './activities';
import {
  type BreakerObserver,
  type CircuitBreaker,
  type InspectableBreaker,
  FallbackCircuitBreaker,
  InMemoryCircuitBreaker,
} from './breaker';
import { RedisCircuitBreaker, closeBreakerRedis, connectBreakerRedis, redisReady } from './breaker/redis';
import { type SweepActivities, createSweepActivities } from './activities/sweep';
import { createHandoffActivities } from './activities/handoffs';
import { createKeyRecordActivities } from './activities/key-records';
import { createWalletActivities } from './activities/wallets';
import type { ApiConfig, ApiDeps } from './api/app';
import { PaymentsClient, type PaymentsClientOptions } from './client';
import { AesGcmPayloadCodec, encryptingDataConverter } from './codec';
import type { Config, ProviderLimits } from './config';
import { describeCapacity, providerCapacity } from './domain/capacity';
import { providerTaskQueue } from './domain/ids';
import { type RetryOverrides, checkRetryPresets } from './domain/retry';
import { type ApiMetrics, createApiMetrics } from './metrics/api-metrics';
import {
  type WorkerMetrics,
  breakerMetricsObserver,
  createWorkerMetrics,
  paymentSinks,
  providerCallInterceptor,
} from './metrics/worker-metrics';
import { configureKeyHash, keyHash } from './providers/logging';
import { configuredCapabilities, createConfiguredProviders, webhookVerifiers } from './providers/registry';
import type { PaymentProvider } from './providers/types';
import { type ConnectLogger, type TemporalTarget, connectWithin, connectionOptions } from './temporal-connection';
import { clientInterceptors } from './grpc-close-guard';
import { type EnsuredSchedule, type SweepScheduleOptions, ensureSweepSchedule } from './schedules';
import { ZodError } from 'zod';
import type { KeyRecords } from './key-records';
import { walletMetricsObserver } from './metrics/wallet-metrics';
import { openPaymentDatabase } from './payment-database';
import type { WalletLedger } from './wallets';
import { merchantWebhooksTaskQueue } from './domain/merchant-events';
import { merchantWebhookMetrics } from './metrics/merchant-webhook-metrics';
import {
  type MerchantWebhookObserver,
  type MerchantWebhookSettings,
  MerchantEventOutbox,
  WebhookEndpoints,
  createMerchantWebhookActivities,
  defaultMerchantWebhookSettings,
  disabledMerchantWebhookActivities,
  startMerchantEventPruner,
} from './merchant-webhooks';

export interface WorkerSetup {
  readonly connection: NativeConnection;
  readonly namespace: string;
  readonly taskQueue: string;
  readonly providers: Readonly<Record<string, PaymentProvider>>;
  readonly logger: PinoLogger;
  /** A prebuilt bundle (production) or the path to bundle at start-up (development, tests). */
  readonly workflows: Pick<WorkerOptions, 'workflowBundle'> | Pick<WorkerOptions, 'workflowsPath'>;
  /** Extra activities (e.g. the sweep's visibility queries) registered beside the provider activities. */
  readonly activities?: Partial<Activities> & Partial<SweepActivities>;
  /** Per-provider circuit breaker; default one in-memory breaker for this process. */
  readonly breaker?: CircuitBreaker;
  /** Default per-worker concurrency of each provider's activity worker (a provider's own limit wins). */
  readonly maxConcurrentActivityTaskExecutions?: number;
  /**
   * The workflow worker's cache of open workflows (SDK default: sized from the heap limit, ~2300 with a 4 GiB heap) and
   * whether they share one V8 context (SDK default true). Each cached payment holds its workflow state in memory;
   * `npm run bench -- --memory` measures what one costs.
   */
  readonly workflowCache?: Pick<WorkerOptions, 'maxCachedWorkflows' | 'reuseV8Context'>;
  /** Per provider: fleet-wide activities per second (server-enforced) and this worker's concurrency. */
  readonly providerLimits?: Readonly<Record<string, ProviderLimits>>;
  /**
   * The worker's retry presets (`RETRY_*`; default the production presets). A shape-3 charge records them in its first
   * workflow task and runs every activity with them (older shapes carry the starter's in their input).
   */
  readonly retry?: RetryOverrides;
  /** Payload encryption (src/codec); default none. Clients of the same workflows must use the same one. */
  readonly dataConverter?: DataConverter;
  /** Where provider calls and reconciles are counted; default a registry of their own. */
  readonly metrics?: WorkerMetrics;
  /**
   * The wallet ledger: its activities (`holdWallet`, ...) run on the workflow task queue (docs/architecture.md#where-
   * balances-live says why). Absent: no wallet activities.
   */
  readonly wallets?: WalletLedger;
  /**
   * Webhooks to merchants: the payments' handoff (on the workflow task queue) and a worker on the webhook queue
   * (`<taskQueue>.merchant-webhooks`) that runs each merchant's delivery workflow. Absent: the handoff answers
   * `disabled` (payments started with `merchantEvents` announce nothing) and no webhook worker runs.
   */
  readonly merchantWebhooks?: MerchantWebhookWorkers;
  /**
   * The key-record table the payments hand their keys' first final answers to (docs/operations.md#key-records).
   * Absent: the handoff answers `disabled` (payments started with `keyRecords` keep nothing).
   */
  readonly keyRecords?: KeyRecords;
}

/** The webhook side of the workers (see {@link WorkerSetup.merchantWebhooks}). */
export interface MerchantWebhookWorkers {
  readonly outbox: MerchantEventOutbox;
  /** Starts and wakes the delivery workflows (the stack passes its workers' client). */
  readonly client: Client;
  /** Default {@link defaultMerchantWebhookSettings}. */
  readonly settings?: MerchantWebhookSettings;
  readonly observer?: MerchantWebhookObserver;
  /** Activity slots of the webhook worker: merchants whose rounds it runs at once (default 100). */
  readonly slots?: number;
}

/** Activity slots of each provider's activity worker when neither its limits nor the setup say otherwise. */
export const defaultProviderConcurrency = 50;

/**
 * At worker start, before anything connects: per provider, whether this worker's slots and the attempt timeouts fit
 * the retry presets' budgets under a full queue (src/domain/capacity.ts). Logs the numbers; a promise that cannot be
 * kept refuses the start in production (throws, with the numbers) and is a warning elsewhere, where budgets are
 * compressed on purpose (the demo, the soak); a rate limit the slots cannot absorb is a warning.
 */
export function checkWorkerCapacity(config: Config, logger: PinoLogger): void {
  const refusals: string[] = [];
  for (const [provider, capabilities] of Object.entries(configuredCapabilities(config))) {
    const limits = config.providerLimits[provider];
    const capacity = providerCapacity({
      provider,
      capabilities,
      retry: config.retry,
      slots: limits?.maxConcurrency ?? defaultProviderConcurrency,
      ...(limits?.maxRps === undefined ? {} : { maxRps: limits.maxRps }),
    });
    logger.info({ provider, slots: capacity.slots }, describeCapacity(capacity));
    for (const f of capacity.findings) {
      if (f.severity === 'refuse' && config.NODE_ENV === 'production') refusals.push(f.message);
      else if (f.severity === 'refuse')
        logger.warn({ provider }, `${f.message} (In production this worker refuses to start.)`);
      else logger.warn({ provider }, f.message);
    }
  }
  if (refusals.length > 0) {
    throw new Error(`worker slots do not fit the retry budgets:\n${refusals.map((r) => `  ${r}`).join('\n')}`);
  }
}

/** Builds the workflow worker and one activity worker per provider. */
export async function createWorkers(setup: WorkerSetup): Promise<Worker[]> {
  assertRetryPresets(setup.providers, setup.retry);
  const breaker = setup.breaker ?? new InMemoryCircuitBreaker();
  const hooks = setup.merchantWebhooks;
  const webhookActivities =
    hooks === undefined
      ? undefined
      : createMerchantWebhookActivities({
          outbox: hooks.outbox,
          client: hooks.client,
          settings: hooks.settings ?? defaultMerchantWebhookSettings,
          logger: setup.logger,
          ...(hooks.observer === undefined ? {} : { observer: hooks.observer }),
        });
  // Every payment worker takes a payment's webhook handoff, if only to answer that it has no webhooks; the same for
  // its key answers: without a table they are answered `disabled`. And both at once (src/activities/handoffs.ts).
  const newsHandoffs = {
    announcePaymentEvent: (webhookActivities ?? disabledMerchantWebhookActivities).announcePaymentEvent,
    ...createKeyRecordActivities(setup.keyRecords),
  };
  const walletActivities =
    setup.wallets === undefined ? undefined : createWalletActivities({ ledger: setup.wallets, logger: setup.logger });
  const activities = {
    ...createActivities({
      providers: setup.providers,
      logger: setup.logger,
      breaker,
      ...(setup.retry === undefined ? {} : { retry: setup.retry }),
      // Their creates run on their own queues only, where the limits apply (never as a local first attempt).
      providersWithLimits: Object.keys(setup.providerLimits ?? {}),
      ...(walletActivities === undefined ? {} : { walletSteps: walletActivities }),
    }),
    ...walletActivities,
    ...newsHandoffs,
    ...createHandoffActivities(newsHandoffs),
    ...setup.activities,
  };
  const metrics = setup.metrics ?? createWorkerMetrics(new Registry());
  // Metrics and encryption: the same on every worker of the process.
  const common = {
    ...(setup.dataConverter === undefined ? {} : { dataConverter: setup.dataConverter }),
    interceptors: { activity: [providerCallInterceptor(metrics)] },
  };
  if (setup.workflowCache?.maxCachedWorkflows === 0) {
    // The payments' first steps are local activities: config.WORKER_MAX_CACHED_WORKFLOWS says why none is refused.
    throw new TypeError('workflowCache.maxCachedWorkflows must be at least 1: the payments run local activities');
  }
  const workflowWorker = await Worker.create({
    connection: setup.connection,
    namespace: setup.namespace,
    taskQueue: setup.taskQueue,
    ...setup.workflows,
    ...setup.workflowCache,
    // Local activities (describeProvider; a shape-3 charge's first step, firstCreateAttempt) run here, beside the
    // workflows.
    activities,
    ...common,
    sinks: paymentSinks(metrics),
  });
  const providerWorkers = await Promise.all(
    Object.keys(setup.providers).map((name) => {
      const limits = setup.providerLimits?.[name];
      return Worker.create({
        connection: setup.connection,
        namespace: setup.namespace,
        taskQueue: providerTaskQueue(setup.taskQueue, name),
        activities,
        ...common,
        maxConcurrentActivityTaskExecutions:
          limits?.maxConcurrency ?? setup.maxConcurrentActivityTaskExecutions ?? defaultProviderConcurrency,
        // The Temporal server hands out at most this many of the queue's activities per second, to all workers.
        ...(limits?.maxRps === undefined ? {} : { maxTaskQueueActivitiesPerSecond: limits.maxRps }),
      });
    }),
  );
  // Each merchant's delivery workflow and its rounds: a queue of their own, so a slow endpoint never holds a payment's
  // slot, and one slot per merchant round, so it never holds more than its share of this one.
  const webhookWorker =
    webhookActivities === undefined
      ? []
      : [
          await Worker.create({
            connection: setup.connection,
            namespace: setup.namespace,
            taskQueue: merchantWebhooksTaskQueue(setup.taskQueue),
            ...setup.workflows,
            activities: { deliverDueMerchantEvents: webhookActivities.deliverDueMerchantEvents },
            ...common,
            maxConcurrentActivityTaskExecutions: hooks?.slots ?? 100,
          }),
        ];
  return [workflowWorker, ...providerWorkers, ...webhookWorker];
}

/**
 * Every payment runs the worker's retry presets in workflow code (shape 3 records them), where one inconsistent with a
 * provider's capabilities would fail the payment before anything is sent: refuse them when the workers are built.
 */
function assertRetryPresets(
  providers: Readonly<Record<string, PaymentProvider>>,
  retry: RetryOverrides | undefined,
): void {
  for (const [name, provider] of Object.entries(providers)) {
    const [refused] = checkRetryPresets(provider.capabilities, retry).refusals;
    if (refused !== undefined) {
      throw new TypeError(`retry settings for ${refused.operation} at ${name}: ${refused.message}`, {
        cause: refused.cause,
      });
    }
  }
}

/**
 * The breaker of this worker process: with REDIS_URL, the Redis store shared by every worker, falling back to an
 * in-process one while Redis is unreachable; without it, the in-process store alone (fine for one worker).
 */
export async function createBreaker(
  config: Pick<Config, 'REDIS_URL' | 'REDIS_KEY_PREFIX' | 'breaker'>,
  logger: PinoLogger,
  /** Hears transitions, probes, cool-downs, refusals and store switches of whichever store answers (metrics). */
  observer?: BreakerObserver,
): Promise<{ readonly breaker: CircuitBreaker; close(): Promise<void> }> {
  const policy = { ...config.breaker, ...(observer === undefined ? {} : { observer }) };
  const local = new InMemoryCircuitBreaker(policy);
  if (config.REDIS_URL === undefined) {
    logger.info({ breakerStore: 'in-process' }, 'circuit breaker: in-process store (REDIS_URL not set)');
    return { breaker: local, close: async () => undefined };
  }
  const redis = connectBreakerRedis(config.REDIS_URL, (err) => logger.debug({ err }, 'breaker Redis connection'));
  const shared = new RedisCircuitBreaker(redis, { ...policy, keyPrefix: config.REDIS_KEY_PREFIX });
  const breaker = new FallbackCircuitBreaker(shared, local, logger, observer);
  // Never block start-up on Redis: payments go on with the in-process store until it answers.
  const ready = await redisReady(redis, 2_000);
  const where = new URL(config.REDIS_URL).host; // never the password
  if (ready) logger.info({ breakerStore: 'redis', redis: where }, 'circuit breaker: shared Redis store');
  else logger.warn({ breakerStore: 'in-process', redis: where }, 'circuit breaker: Redis not reachable yet');
  return { breaker, close: () => closeBreakerRedis(redis) };
}

/** The workers of a stack: everything of {@link WorkerSetup} the stack does not supply itself. */
export type StackWorkers = Omit<
  WorkerSetup,
  'connection' | 'namespace' | 'taskQueue' | 'logger' | 'dataConverter' | 'merchantWebhooks'
> & {
  /** Webhooks to merchants, over the stack's workers' client (see {@link WorkerSetup.merchantWebhooks}). */
  readonly merchantWebhooks?: Omit<MerchantWebhookWorkers, 'client'>;
  /** Register the reconcile sweep's activities (over {@link Stack.workerClient}), as the worker process does. */
  readonly sweep?: boolean;
  /** Poll as soon as the stack is up (default); false: from {@link Stack.startWorkers} or {@link Stack.run} on. */
  readonly start?: boolean;
};

/** The HTTP API of a stack: its own {@link PaymentsClient} on the stack's task queue, and the Fastify app. */
export interface StackApi {
  /** How its PaymentsClient starts and waits for payments (the task queue is the stack's). */
  readonly payments: Omit<PaymentsClientOptions, 'taskQueue'>;
  /** Tokens of merchants and operators. */
  readonly config: ApiConfig;
  /** The webhook verifier of each provider whose webhooks it accepts. */
  readonly webhooks: ApiDeps['webhooks'];
  /** Request and webhook metrics; default a registry of their own. */
  readonly metrics?: ApiMetrics;
  /** Serve the stack's codec to operators at `/codec/*`, with these CORS origins; absent: no codec routes. */
  readonly codecCorsOrigins?: readonly string[];
  /** Browser origins that may decode without a token (`CODEC_TRUSTED_ORIGINS`, development); default none. */
  readonly codecTrustedOrigins?: readonly string[];
  /** Where it listens; default 127.0.0.1 on a free port. */
  readonly listen?: { readonly host: string; readonly port: number };
  /** The wallet ledger behind `/v1/wallets`; absent: those routes answer 404. */
  readonly wallets?: WalletLedger;
  /** The endpoint table behind `/v1/webhook-endpoint`; absent: those routes answer 404. */
  readonly webhookEndpoints?: ApiDeps['webhookEndpoints'];
}

/** What {@link startStack} builds and from which parts. */
export interface StackOptions {
  readonly logger: PinoLogger;
  readonly namespace: string;
  /** The workflow task queue; each provider's activities have their own queue beside it. */
  readonly taskQueue: string;
  /**
   * Encrypts every payload the workers and the client write, failure messages and stack traces included (src/codec);
   * default none. A prebuilt workflow bundle must be built with the same `failureConverterPath`.
   */
  readonly codec?: PayloadCodec;
  /** Connected to for each side whose connection is not given (and closed with the stack). */
  readonly temporal?: TemporalTarget;
  /** The workers' connection, e.g. a test environment's `nativeConnection` (left open by `close()`). */
  readonly nativeConnection?: NativeConnection;
  /** The API client's connection, e.g. a test environment's `connection` (left open by `close()`). */
  readonly connection?: Connection;
  /** The API's Temporal client as it is (e.g. a test environment's `client`); only without a codec. */
  readonly client?: Client;
  /** Workers in this process; absent: none. */
  readonly workers?: StackWorkers;
  /** An HTTP API in this process; absent: none. */
  readonly api?: StackApi;
  /** Closed by `close()` after the workers drained, in order (e.g. the breaker's Redis, the providers). */
  readonly closers?: readonly (() => Promise<void>)[];
}

/** One API instance: its PaymentsClient, its app and where it listens. */
export interface RunningApi {
  readonly app: FastifyInstance;
  readonly payments: PaymentsClient;
  readonly url: string;
}

/** A running stack. */
export interface Stack {
  /** The first API (when the stack has one). */
  readonly api: RunningApi | undefined;
  /** The workers' Temporal client (their connection and codec): the sweep's activities and the sweep schedule use it. */
  readonly workerClient: Client | undefined;
  /** Creates the workers (once) without polling yet. */
  createWorkers(): Promise<readonly Worker[]>;
  /** Creates the workers (once) and lets them poll in the background. */
  startWorkers(): Promise<void>;
  /** Polls until every worker shut down (SIGINT/SIGTERM make them drain) or one fails. */
  run(): Promise<void>;
  /** Another API instance over the same Temporal client, as a second API process would be. */
  startApi(): Promise<RunningApi>;
  /** Stops the APIs, drains the workers, runs the closers, closes the connections it opened. Idempotent. */
  close(): Promise<void>;
}

/** Builds the stack of `options` (and starts what it says); `close()` undoes it, also after a failed start. */
export async function startStack(options: StackOptions): Promise<Stack> {
  const { logger, namespace, taskQueue, codec } = options;
  // Payloads and failure texts alike: the workers' and the API's client must convert the same way.
  const dataConverter: DataConverter | undefined = codec === undefined ? undefined : encryptingDataConverter(codec);
  const owned: (() => Promise<void>)[] = [];
  const apps: FastifyInstance[] = [];
  let workers: Promise<Worker[]> | undefined;
  let running: Promise<void> | undefined;
  let nativeConnection = options.nativeConnection;
  let workerClient: Client | undefined;
  let apiClient: Client | undefined;

  const target = (): TemporalTarget => {
    if (options.temporal === undefined) throw new TypeError('startStack: give a connection or `temporal`');
    return options.temporal;
  };

  // A process started while the server restarts waits for it (TEMPORAL_CONNECT_WAIT_MS) instead of exiting.
  const connectPatiently = <C>(connect: (o: NativeConnectionOptions) => Promise<C>): Promise<C> => {
    const opts = connectionOptions(target());
    return connectWithin(() => connect(opts), {
      waitMs: target().TEMPORAL_CONNECT_WAIT_MS ?? 0,
      address: opts.address ?? '',
      logger,
    });
  };

  const createWorkersOnce = (): Promise<Worker[]> => {
    const setup = options.workers;
    if (setup === undefined || nativeConnection === undefined) {
      return Promise.reject(new TypeError('startStack: this stack has no workers'));
    }
    const connection = nativeConnection;
    const { sweep, start: _start, merchantWebhooks, ...rest } = setup;
    return (workers ??= createWorkers({
      ...rest,
      connection,
      namespace,
      taskQueue,
      logger,
      ...(merchantWebhooks && workerClient ? { merchantWebhooks: { ...merchantWebhooks, client: workerClient } } : {}),
      ...(sweep && workerClient
        ? { activities: { ...createSweepActivities({ client: workerClient, logger }), ...rest.activities } }
        : {}),
      ...(dataConverter === undefined ? {} : { dataConverter }),
    }));
  };

  const startWorkers = async (): Promise<void> => {
    const list = await createWorkersOnce();
    running ??= Promise.all(list.map((w) => w.run())).then(() => undefined);
  };

  const startApi = async (): Promise<RunningApi> => {
    const api = options.api;
    if (api === undefined || apiClient === undefined) throw new TypeError('startStack: this stack has no API');
    const metrics = api.metrics ?? createApiMetrics();
    // The API's ledger checks a charge's wallet part before it starts, and debits a wallet-only payment once it
    // started (src/client/wallet-only.ts; the workers' ledger takes the rest), counted in the API's metrics.
    const wallets = api.wallets?.withObserver(walletMetricsObserver(metrics.registry));
    const payments = new PaymentsClient(apiClient, { taskQueue, ...api.payments, ...(wallets ? { wallets } : {}) });
    // Loaded when an API starts, not with this module: fastify, its swagger and zod plugins and the routes are about a
    // twentieth of the CPU of loading the stack, which a worker process and the tests that start no API never use.
    const { buildApi } = await import('./api/app');
    const app = await buildApi({
      client: payments,
      config: api.config,
      logger,
      webhooks: api.webhooks,
      keyHash,
      metrics,
      ...(api.wallets ? { wallets: api.wallets } : {}),
      ...(api.webhookEndpoints ? { webhookEndpoints: api.webhookEndpoints } : {}),
      ...(codec && api.codecCorsOrigins
        ? {
            codec: {
              codec,
              corsOrigins: api.codecCorsOrigins,
              trustedOrigins: api.codecTrustedOrigins ?? [],
            },
          }
        : {}),
    });
    apps.push(app);
    const listen = api.listen ?? { port: 0, host: '127.0.0.1' };
    await app.listen(listen);
    // A wildcard address is reached on the loopback interface.
    const host = ['0.0.0.0', '::', ''].includes(listen.host)
      ? '127.0.0.1'
      : listen.host.includes(':')
        ? `[${listen.host}]`
        : listen.host;
    return { app, payments, url: `http://${host}:${(app.server.address() as AddressInfo).port}` };
  };

  let closing: Promise<void> | undefined;
  const close = (): Promise<void> =>
    (closing ??= runClosers([
      // The APIs first (no new requests or webhooks), then the workers (activities in flight still have their
      // providers), then what the caller handed over, then the connections opened here.
      async () => void (await Promise.all(apps.map((app) => app.close()))),
      async () => {
        if (running === undefined) return;
        for (const w of (await workers) ?? []) if (w.getState() === 'RUNNING') w.shutdown();
        await running;
      },
      ...(options.closers ?? []),
      ...owned.reverse(),
    ]));

  try {
    if (options.workers !== undefined) {
      if (nativeConnection === undefined) {
        const connection = await connectPatiently((o) => NativeConnection.connect(o));
        owned.push(() => connection.close());
        nativeConnection = connection;
      }
      workerClient = new Client({
        connection: nativeConnection,
        namespace,
        ...(dataConverter === undefined ? {} : { dataConverter }),
      });
    }
    let api: RunningApi | undefined;
    if (options.api !== undefined) {
      if (options.client !== undefined && codec === undefined) {
        apiClient = options.client;
      } else {
        let connection = options.connection;
        if (connection === undefined) {
          // grpc-js, not a NativeConnection: with the Rust core's client the API's own deadline did not bound the
          // submit's wait for a worker (8.6 s instead of SUBMIT_WAIT_MS + margin, test/scenarios/no-worker.test.ts), though
          // it costs ~0.5-1 ms less CPU per charge (bench/rpc-cost.ts).
          const opened = await connectPatiently((o) =>
            Connection.connect({ ...o, interceptors: clientInterceptors() }),
          );
          owned.push(() => opened.close());
          connection = opened;
        }
        apiClient = new Client({ connection, namespace, ...(dataConverter === undefined ? {} : { dataConverter }) });
      }
      api = await startApi();
    }
    if (options.workers !== undefined && options.workers.start !== false) await startWorkers();
    return {
      api,
      workerClient,
      createWorkers: createWorkersOnce,
      startWorkers,
      run: async () => {
        await startWorkers();
        await running;
      },
      startApi,
      close,
    };
  } catch (err) {
    await close().catch(() => undefined);
    throw err;
  }
}

/** The production stack's parts of a process: workers (the worker process) or the API (the API process). */
export interface ConfiguredParts {
  readonly workers?: boolean;
  readonly api?: boolean;
}

/** A stack built from the configuration, with the worker metrics it counts into (when it has workers). */
export interface ConfiguredStack extends Stack {
  readonly workerMetrics: WorkerMetrics | undefined;
  /** The providers the workers call, by name. */
  readonly providers: Readonly<Record<string, PaymentProvider>>;
}

/**
 * The production wiring from the validated configuration: the providers of the configuration, the shared breaker, the
 * worker metrics and the sweep's activities for the workers; tokens, webhook verifiers and the codec routes for the API,
 * listening on HOST:PORT. The workers are created, not yet polling: `run()` starts them.
 */
export async function startConfiguredStack(
  config: Config,
  logger: PinoLogger,
  parts: ConfiguredParts,
): Promise<ConfiguredStack> {
  // Before anything logs a key's hash: this process's lines and the other processes' carry the same.
  configureKeyHash(config.LOG_HASH_SECRET);
  const closers: (() => Promise<void>)[] = [];
  let providers: Record<string, PaymentProvider> = {};
  let metrics: WorkerMetrics | undefined;
  let workers: StackWorkers | undefined;
  let handedOver = false;
  try {
    // Wallets and key records live in PostgreSQL when DATABASE_URL names one; migrated by whichever process opens it
    // first. Its pool closes last, after the workers drained and the pruner stopped.
    const database =
      config.DATABASE_URL === undefined
        ? undefined
        : await openPaymentDatabase({
            url: config.DATABASE_URL,
            poolSize: config.DATABASE_POOL_SIZE,
            statementTimeoutMs: config.DATABASE_STATEMENT_TIMEOUT_MS,
            keyRetentionDays: config.KEY_RETENTION_DAYS,
            applicationName: `payment-workflows-${parts.workers ? 'worker' : 'api'}`,
            logger,
            // Each process prunes what its part writes: the workers key records, the API order claims.
            prune: {
              keyRecordsEveryMs: parts.workers ? config.KEY_RECORD_PRUNE_INTERVAL_MS : false,
              orderClaimsEveryMs: parts.api ? 3_600_000 : false,
            },
          });
    // Webhooks to merchants: their endpoints and event queue live in the same database.
    const hooks = database && config.MERCHANT_WEBHOOKS ? new MerchantEventOutbox(database.pool) : undefined;
    // Key records too: the workers keep each key's first final answer there, the API answers repeats from it.
    const keyRecords = database?.keyRecords;
    if (parts.workers) {
      // Our registry first: the breaker's observer counts into it from the first call on.
      const registry = new Registry();
      const breaker = await createBreaker(config, logger, breakerMetricsObserver(registry));
      closers.push(() => breaker.close());
      metrics = workerMetrics(registry, breaker.breaker, config.providers);
      providers = createConfiguredProviders(config, logger);
      const adapters = Object.values(providers);
      closers.push(async () => void (await Promise.all(adapters.map((p) => p.close?.()))));
      workers = {
        providers,
        workflows: config.WORKFLOW_BUNDLE_PATH
          ? { workflowBundle: { codePath: config.WORKFLOW_BUNDLE_PATH } }
          : { workflowsPath: require.resolve('./workflows') },
        // The sweep's activities query visibility and signal payments: a client over the worker's own connection.
        sweep: true,
        breaker: breaker.breaker,
        providerLimits: config.providerLimits,
        retry: config.retry,
        metrics,
        start: false,
        ...(config.WORKER_MAX_CACHED_WORKFLOWS === undefined
          ? {}
          : { workflowCache: { maxCachedWorkflows: config.WORKER_MAX_CACHED_WORKFLOWS } }),
        ...(database ? { wallets: database.wallets.withObserver(walletMetricsObserver(registry)) } : {}),
        ...(hooks ? { merchantWebhooks: merchantWebhookWorkers(config, hooks, registry) } : {}),
        ...(keyRecords ? { keyRecords } : {}),
      };
      if (hooks) {
        const pruner = startMerchantEventPruner(hooks, logger, config.MERCHANT_WEBHOOK_RETENTION_DAYS);
        closers.push(() => pruner.stop());
      }
    }
    // One open payment per order across API processes: the order claims they share (src/client/order-guard.ts).
    const orderClaims = database && parts.api ? database.orderClaims : undefined;
    // Its pruning stops first, then its pool ends.
    if (database) closers.push(() => database.close());
    const options: StackOptions = {
      logger,
      namespace: config.TEMPORAL_NAMESPACE,
      taskQueue: config.TASK_QUEUE,
      temporal: config,
      codec: new AesGcmPayloadCodec(config.payloadKeys),
      ...(workers ? { workers } : {}),
      ...(parts.api
        ? {
            api: {
              payments: {
                timings: config.timings,
                // Names only: capabilities and RETRY_* presets are the worker's, recorded by each payment (shape 3).
                providers: config.providers,
                defaultProvider: config.defaultProvider,
                orderSingleFlight: config.ORDER_SINGLE_FLIGHT,
                splitPaymentMerchants: config.SPLIT_PAYMENT_MERCHANTS,
                merchantEvents: hooks !== undefined,
                ...(keyRecords ? { keyRecords } : {}),
                ...(orderClaims ? { orderClaims } : {}),
              },
              config,
              webhooks: webhookVerifiers(config),
              codecCorsOrigins: config.CODEC_CORS_ORIGINS,
              codecTrustedOrigins: config.CODEC_TRUSTED_ORIGINS,
              listen: { port: config.PORT, host: config.HOST },
              ...(database ? { wallets: database.wallets } : {}),
              ...(database && hooks
                ? {
                    webhookEndpoints: {
                      endpoints: new WebhookEndpoints(database.pool),
                      allowPrivateUrls: config.MERCHANT_WEBHOOK_ALLOW_PRIVATE_URLS,
                    },
                  }
                : {}),
            },
          }
        : {}),
      closers,
    };
    handedOver = true; // startStack closes them itself when it fails
    const stack = await startStack(options);
    try {
      if (workers) await stack.createWorkers();
    } catch (err) {
      await stack.close().catch(() => undefined);
      throw err;
    }
    return { ...stack, workerMetrics: metrics, providers };
  } catch (err) {
    // Before the stack took them over; after, its own close() ran them.
    if (!handedOver) await runClosers(closers).catch(() => undefined);
    throw err;
  }
}

/** The webhook side of the configured workers: the queue, the `MERCHANT_WEBHOOK_*` settings, metrics on `registry`. */
function merchantWebhookWorkers(
  config: Config,
  outbox: MerchantEventOutbox,
  registry: Registry,
): Omit<MerchantWebhookWorkers, 'client'> {
  return {
    outbox,
    settings: config.merchantWebhooks,
    observer: merchantWebhookMetrics(registry, () => outbox.backlog()),
    slots: config.MERCHANT_WEBHOOK_WORKER_SLOTS,
  };
}

/** Our registry (WORKER_METRICS_ADDRESS); the breaker gauge reads the process's breaker on each scrape. */
function workerMetrics(registry: Registry, breaker: CircuitBreaker, providers: readonly string[]): WorkerMetrics {
  collectDefaultMetrics({ register: registry });
  const inspectable = 'state' in breaker ? (breaker as InspectableBreaker) : undefined;
  return createWorkerMetrics(
    registry,
    inspectable ? { providers, state: async (p) => (await inspectable.state(p)).kind } : undefined,
  );
}

/** Runs every closer in order even when one fails; rethrows the first failure. */
export async function runClosers(closers: readonly (() => Promise<void>)[]): Promise<void> {
  let first: unknown;
  for (const close of closers) {
    try {
      await close();
    } catch (err) {
      first ??= err;
    }
  }
  if (first !== undefined) throw first;
}

/**
 * {@link ensureSweepSchedule}, repeated until it succeeds or `waitMs` has passed: a worker started while Temporal's
 * database restarts finds the frontend reachable but failing (the cluster soak's PostgreSQL restart saw
 * `NamespaceNotFoundError` from every worker starting then, each exit a crash for its supervisor). Options that make
 * no valid sweep input (ZodError) are thrown at once.
 */
export function ensureSweepScheduleWithin(
  client: Client,
  opts: SweepScheduleOptions,
  wait: { readonly waitMs: number; readonly address: string; readonly logger?: ConnectLogger },
): Promise<EnsuredSchedule> {
  return connectWithin(() => ensureSweepSchedule(client, opts), {
    ...wait,
    what: 'the reconcile sweep schedule (Temporal)',
    retryable: (err) => !(err instanceof ZodError),
  });
}
