/**
 * The tests' one world: the real simulator over HTTP with this world's merchant at it, the real REST provider pointed at
 * it, and the real workers (src/stack.ts) on a fresh task queue, against whichever Temporal environment the test chose;
 * with `api: true` also the real API over HTTP (Fastify on 127.0.0.1:0) with its own PaymentsClient, merchants A and B,
 * an operator and a codec reader, and the simulator's webhooks pointed at it; with `stripeMock` Stripe beside the
 * simulator, as stripe-mocks behind a recording front.
 *
 * Without the API (workflow tests, often on a time-skipping server) the workers poll only inside `run(fn)`; with it they
 * poll from the start (or from `startWorkers()`), as the processes do. The set-up and the tear-down are the same code.
 */
import { randomUUID } from 'node:crypto';
import type { PayloadCodec } from '@temporalio/common';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { Connection } from '@temporalio/client';
import type { FastifyInstance } from 'fastify';
import pino from 'pino';
import { type CircuitBreaker, InMemoryCircuitBreaker } from '../../src/breaker';
import type { PaymentsClient } from '../../src/client';
import { chargeFingerprint } from '../../src/client/fingerprint';
import { ChargeRequest, type ChargeRequestInput } from '../../src/domain/payment';
import type { RetryOverrides } from '../../src/domain/retry';
import type { ChargeWorkflowInput, PaymentTimings } from '../../src/domain/workflow-inputs';
import {
  type PaymentProvider,
  createProvider,
  simulatorCapabilities,
  simulatorCapabilitiesWithoutKeys,
  webhookVerifiers,
} from '../../src/providers';
import type { RestProvider } from '../../src/providers/rest/adapter';
import { type RunningSimulator, startSimulator } from '../../src/simulator/server';
import type { ApiMetrics } from '../../src/metrics/api-metrics';
import type { WorkerMetrics } from '../../src/metrics/worker-metrics';
import { type RunningApi, type Stack, type StackWorkers, type WorkerSetup, startStack } from '../../src/stack';
import type { KeyRecords } from '../../src/key-records';
import type { OrderClaims } from '../../src/db';
import type { WalletLedger } from '../../src/wallets';
import type { WebhookEndpoints } from '../../src/merchant-webhooks';
import { chargeRequest, fastTimings } from './payments';
import { connectDevServer, createTimeSkippingEnv } from './servers';
import {
  type ConfiguredStripe,
  type StripeStates,
  type StripeStatesOptions,
  configuredStripe,
  newStripeWebhookSecret,
  startStripeStates,
} from './stripe-states';
import { workflowBundle } from './workflow-bundle';

/** The API's real-time timings: a reconcile waits a minute first, so an unknown payment stays unknown during a test. */
export const testTimings: PaymentTimings = {
  // Generous: on two loaded cores a first provider call can take seconds, and a 202 where 200 is expected is a flake.
  submitWaitMs: 8_000,
  reconcileScheduleMs: [60_000, 120_000],
  settleWindowMs: 5_000,
  authorizationExpiryMs: 600_000,
  refundWindowMs: 600_000,
  unknownSweepThresholdMs: 3_600_000,
};

/** Short create retries, so a provider that keeps failing leaves the payment `unknown` within seconds. */
export const testRetry: RetryOverrides = {
  create: {
    initialIntervalMs: 200,
    maximumIntervalMs: 500,
    attemptTimeoutMs: 2_000,
    budgetMs: 6_000,
    maximumAttempts: 2,
  },
};

export const WEBHOOK_SECRET = 'whsec_test_api_harness';

/** One merchant of the API with its bearer token. */
export interface TestMerchant {
  readonly id: string;
  readonly token: string;
}

/** A decoded API answer. */
export interface ApiResponse {
  readonly status: number;
  readonly headers: Headers;
  // Tests read arbitrary fields; shapes are asserted with expect().
  readonly body: Record<string, unknown> & { error?: { type: string; fields?: { path: string }[] } };
}

/** Options of {@link ApiWorld.request}. */
export interface RequestOptions {
  readonly token?: string | null;
  readonly key?: string;
  readonly body?: unknown;
  readonly rawBody?: string;
  readonly headers?: Record<string, string>;
  /** Another API instance's URL (default: the first one's). */
  readonly baseUrl?: string;
}

/** The API's operator: its id and bearer token (config `OPERATOR_TOKENS`). */
export interface TestOperator {
  readonly id: string;
  readonly token: string;
}

/** The provider side and the workers: what every world has. */
interface WorldBase {
  readonly env: TestWorkflowEnvironment;
  readonly sim: RunningSimulator;
  readonly provider: RestProvider;
  readonly apiKey: string;
  readonly taskQueue: string;
  /** The merchant of {@link input} (with the API: merchant A). */
  readonly merchantId: string;
  /** A chargeWorkflow input for `request` under `key`. */
  input(
    request: ChargeRequestInput,
    opts?: { key?: string; timings?: Partial<PaymentTimings>; retry?: RetryOverrides },
  ): ChargeWorkflowInput;
  /** Remembers a workflow to terminate at close: a test's leftovers must not hold the next test's skipped time. */
  track(workflowId: string): void;
  /** Effects and requests the simulator recorded for this world's api key. */
  ledger(): ReturnType<RunningSimulator['ledger']>;
  close(): Promise<void>;
}

/** A world without the API. */
export interface World extends WorldBase {
  /** Runs `fn` while the workers poll; shuts them down afterwards. */
  run<T>(fn: () => Promise<T>): Promise<T>;
}

/** A world with the API; its workers poll from the start unless `workers: false`. */
export interface ApiWorld extends WorldBase {
  readonly url: string;
  readonly app: FastifyInstance;
  readonly payments: PaymentsClient;
  /** Merchant A (the default token) and merchant B. */
  readonly a: TestMerchant;
  readonly b: TestMerchant;
  /** An operator token: resolves reviews, nothing else. */
  readonly operator: TestOperator;
  /** A decode-only codec token (config `CODEC_TOKENS`): `POST /codec/decode`, nothing else. */
  readonly codecReader: { readonly id: string; readonly token: string };
  request(method: string, path: string, opts?: RequestOptions): Promise<ApiResponse>;
  /** Starts another API process-equivalent (own PaymentsClient) on the same workers; answers its URL. */
  anotherApi(): Promise<string>;
  /** Starts the workers when the world was started without them (`workers: false`); no-op otherwise. */
  startWorkers(): Promise<void>;
}

/** The provider and the workers, with or without the API. */
export interface WorldOptions {
  readonly api?: false;
  /** Merchant without idempotency keys at the simulator (every POST a new effect). */
  readonly noKeys?: boolean;
  readonly keyTtlS?: number;
  /** The provider's total HTTP timeout (default: see {@link defaultsOf}). */
  readonly totalTimeoutMs?: number;
  /** The longest Retry-After the simulator's adapter takes (`PROVIDER_MAX_RETRY_AFTER_MS`; default its own). */
  readonly maxRetryAfterMs?: number;
  /** The workers' circuit breaker (default: see {@link defaultsOf}). */
  readonly breaker?: CircuitBreaker;
  /** Register the reconcile sweep's activities with the workers, as the worker process does. */
  readonly sweep?: boolean;
  /**
   * The workers' retry presets (`RETRY_*`; default: see {@link defaultsOf}): every payment started without presets
   * in its input records them in its first workflow task and runs with them (shape 3).
   */
  readonly retry?: RetryOverrides;
  /** Providers beside the simulator (e.g. `stripe` over stripe-mock), each with its own activity worker. */
  readonly extraProviders?: Readonly<Record<string, PaymentProvider>>;
  /** Per-provider activity limits and the default activity slots of each provider worker (as `createWorkers` takes). */
  readonly providerLimits?: WorkerSetup['providerLimits'];
  readonly maxConcurrentActivityTaskExecutions?: number;
  /** The workers' metrics registry (default: their own, unread). */
  readonly workerMetrics?: WorkerMetrics;
}

/** A world with the API over HTTP. */
export interface ApiWorldOptions extends Omit<WorldOptions, 'api'> {
  readonly api: true;
  readonly timings?: Partial<PaymentTimings>;
  /** How long a capture or a refund waits for its outcome before answering 202 (default the timings' `submitWaitMs`). */
  readonly operationWaitMs?: number;
  /** Point the simulator's webhooks at the API (default true). */
  readonly webhooks?: boolean;
  /** One open payment per order (default true, as in production). */
  readonly orderSingleFlight?: boolean;
  /** Start the workers with the world (default true); `false`: none poll the task queue until `startWorkers()`. */
  readonly workers?: boolean;
  /** Merchants exempt from one open payment per order (`SPLIT_PAYMENT_MERCHANTS`); `'b'` names merchant B. */
  readonly splitPaymentMerchants?: readonly 'a'[] | readonly 'b'[] | readonly ('a' | 'b')[];
  /**
   * Payload encryption for the workers and the API's client, and the API's codec routes (CORS origins; origins that
   * decode without a token).
   */
  readonly codec?: {
    readonly codec: PayloadCodec;
    readonly corsOrigins: readonly string[];
    readonly trustedOrigins?: readonly string[];
  };
  /** The API's metrics registry (default: its own, unread). */
  readonly apiMetrics?: ApiMetrics;
  /** Stripe's webhook endpoint secret for the API (`STRIPE_WEBHOOK_SECRET`); absent: `/webhooks/stripe` is 404. */
  readonly stripeWebhookSecret?: string;
  /** The wallet ledger (a test database's) for the API's `/v1/wallets` and the workers' wallet activities. */
  readonly wallets?: WalletLedger;
  /**
   * Webhooks to merchants (a test database's endpoint table and event queue): payments announce their events, the
   * API serves `/v1/webhook-endpoint` (private URLs allowed: the receivers are on 127.0.0.1), the workers deliver.
   */
  readonly merchantWebhooks?: NonNullable<StackWorkers['merchantWebhooks']> & { readonly endpoints: WebhookEndpoints };
  /** Key records (a test database's): payments hand their keys' first answers over, the API answers repeats from them. */
  readonly keyRecords?: KeyRecords;
  /** Order claims (a test database's): one open payment per order across this world's APIs (`anotherApi`). */
  readonly orderClaims?: OrderClaims;
  /**
   * Stripe as a provider beside the simulator (before {@link extraProviders}): stripe-mocks showing these states behind
   * a recording front (test/helpers/stripe-states.ts), the adapter built from the configuration as the worker's main
   * builds it, with `webhookSecret` as `STRIPE_WEBHOOK_SECRET` (then the API serves `/webhooks/stripe` with it).
   */
  readonly stripeMock?: StripeStatesOptions & { readonly webhookSecret?: string };
}

/** A world's Stripe: the stripe-mocks with their front, and the adapter as configured. */
export interface StripeMock {
  readonly states: StripeStates;
  readonly configured: ConfiguredStripe;
}

/** A world with the API and Stripe over stripe-mock. */
export type StripeWorld = ApiWorld & { readonly stripeMock: StripeMock };

/**
 * What a world assumes unless told, by the tests it was written for. Workflow tests give each payment its timings and
 * presets in its input and start fresh workers per `run`, with a fresh breaker. API tests run in real time, so the
 * provider's calls end sooner; their payments carry no presets (the workers' are short); and the tests of one file
 * share the workers and inject provider faults one after another, so a breaker tripped by one test would fail the next
 * test's payments fast: it never opens (the breaker has its own tests, test/activities).
 */
const defaultsOf = (api: boolean) =>
  api
    ? {
        connectTimeoutMs: 500,
        totalTimeoutMs: 1_500,
        retry: testRetry,
        breaker: (): CircuitBreaker | undefined =>
          new InMemoryCircuitBreaker({ failureThreshold: Number.MAX_SAFE_INTEGER }),
      }
    : { connectTimeoutMs: 1_000, totalTimeoutMs: 3_000, retry: undefined, breaker: (): undefined => undefined };

/** Starts a world on `env`: the simulator, the provider, the workers, and with `api: true` the API. */
export async function startWorld(
  env: TestWorkflowEnvironment,
  opts: ApiWorldOptions & { readonly stripeMock: NonNullable<ApiWorldOptions['stripeMock']> },
): Promise<StripeWorld>;
export async function startWorld(env: TestWorkflowEnvironment, opts: ApiWorldOptions): Promise<ApiWorld>;
export async function startWorld(env: TestWorkflowEnvironment, opts?: WorldOptions): Promise<World>;
export async function startWorld(
  env: TestWorkflowEnvironment,
  opts: WorldOptions | ApiWorldOptions = {},
): Promise<World | ApiWorld> {
  const api = opts.api === true ? opts : undefined;
  const defaults = defaultsOf(api !== undefined);
  const logger = pino({ level: process.env.TEST_LOG_LEVEL ?? 'silent' });
  const sim = await startSimulator({ port: 0, webhookRetry: { attempts: 3, baseDelayMs: 200 } });
  const apiKey = `sk_test_${randomUUID()}`;
  const keyTtlS = opts.keyTtlS ?? 86_400;
  const provider = createProvider(
    {
      name: 'simulator',
      baseUrl: sim.url,
      apiKey,
      capabilities: opts.noKeys ? simulatorCapabilitiesWithoutKeys() : simulatorCapabilities(keyTtlS),
      connectTimeoutMs: defaults.connectTimeoutMs,
      totalTimeoutMs: opts.totalTimeoutMs ?? defaults.totalTimeoutMs,
      ...(opts.maxRetryAfterMs === undefined ? {} : { maxRetryAfterMs: opts.maxRetryAfterMs }),
    },
    logger,
  );
  const taskQueue = `${api ? 'api-test' : 'test'}-${randomUUID()}`;
  let stripeMock: StripeMock | undefined;
  if (api?.stripeMock) {
    const states = await startStripeStates(api.stripeMock);
    stripeMock = {
      states,
      configured: configuredStripe(states.front.url, api.stripeMock.webhookSecret ?? newStripeWebhookSecret(), logger),
    };
  }
  const extraProviders = { ...(stripeMock ? { stripe: stripeMock.configured.stripe } : {}), ...opts.extraProviders };
  const bundle = await workflowBundle();
  const breaker = opts.breaker ?? defaults.breaker();
  const retry = opts.retry ?? defaults.retry;
  const workers = (start: boolean): StackWorkers => ({
    providers: { simulator: provider, ...extraProviders },
    workflows: { workflowBundle: bundle },
    ...(opts.sweep ? { sweep: true } : {}),
    ...(opts.workerMetrics ? { metrics: opts.workerMetrics } : {}),
    ...(opts.providerLimits === undefined ? {} : { providerLimits: opts.providerLimits }),
    // The workers' own presets: payments run with these (as the worker process passes its RETRY_*).
    ...(retry === undefined ? {} : { retry }),
    ...(opts.maxConcurrentActivityTaskExecutions === undefined
      ? {}
      : { maxConcurrentActivityTaskExecutions: opts.maxConcurrentActivityTaskExecutions }),
    ...(breaker === undefined ? {} : { breaker }),
    start,
    ...(api?.wallets ? { wallets: api.wallets } : {}),
    ...(api?.merchantWebhooks ? { merchantWebhooks: api.merchantWebhooks } : {}),
    ...(api?.keyRecords ? { keyRecords: api.keyRecords } : {}),
  });
  const stackOptions = { logger, namespace: env.namespace ?? 'default', taskQueue } as const;

  const tracked = new Set<string>();
  /** The API's stack and its client's connection, once started. */
  const apiStack: { stack?: Stack; connection?: Connection } = {};
  const merchantId = `m${api ? 'a' : ''}_${randomUUID().slice(0, 8)}`;
  /** The world's merchant at the simulator (its webhooks to `webhookUrl`), on the Temporal environment's clock. */
  const atSimulator = async (webhookUrl: string | undefined) => {
    await sim.setMerchant(apiKey, {
      idempotency: !opts.noKeys,
      key_ttl_s: keyTtlS,
      ...(webhookUrl === undefined ? {} : { webhook_url: webhookUrl, webhook_secret: WEBHOOK_SECRET }),
    });
    // A time-skipping server's clock runs ahead of the wall clock once a test skipped time; the provider's clock must
    // agree with workflow time, as it does in production, or "created after our first send" means nothing.
    const skew = Math.floor(((await env.currentTimeMs()) - Date.now()) / 1000);
    if (skew > 0) await sim.advanceClock(skew);
  };
  const base: WorldBase = {
    env,
    sim,
    provider,
    apiKey,
    taskQueue,
    merchantId,
    input(requestInput, o = {}) {
      const request = ChargeRequest.parse(requestInput);
      return {
        merchantId,
        key: o.key ?? `key_${randomUUID()}`,
        fingerprint: chargeFingerprint(request),
        request,
        timings: { ...fastTimings, ...o.timings },
        ...(o.retry ? { retry: o.retry } : {}),
      };
    },
    ledger: () => sim.ledger(apiKey),
    track: (workflowId) => void tracked.add(workflowId),
    async close() {
      if (api) await sim.flushWebhooks().catch(() => undefined);
      await Promise.all(
        [...tracked].map((id) =>
          env.client.workflow
            .getHandle(id)
            .terminate('test finished')
            .catch(() => undefined),
        ),
      );
      await apiStack.stack?.close();
      await stripeMock?.configured.close();
      await stripeMock?.states.close();
      await provider.close();
      await sim.close();
      await apiStack.connection?.close();
    },
  };

  if (api === undefined) {
    await atSimulator(undefined);
    return {
      ...base,
      async run(fn) {
        const running = await startStack({
          ...stackOptions,
          nativeConnection: env.nativeConnection,
          workers: workers(true),
        });
        try {
          return await fn();
        } finally {
          await running.close();
        }
      },
    };
  }

  const stripeWebhookSecret = api.stripeWebhookSecret ?? api.stripeMock?.webhookSecret;
  const a = { id: merchantId, token: `tok_a_${randomUUID()}` };
  const b = { id: `mb_${randomUUID().slice(0, 8)}`, token: `tok_b_${randomUUID()}` };
  const operator = { id: `ops_${randomUUID().slice(0, 8)}`, token: `tok_ops_${randomUUID()}` };
  const codecReader = { id: `ui_${randomUUID().slice(0, 8)}`, token: `tok_codec_${randomUUID()}` };
  const connection = (apiStack.connection = await Connection.connect({ address: env.address }));
  const stack = (apiStack.stack = await startStack({
    ...stackOptions,
    // The API's client over a grpc-js connection of its own, as src/api-main.ts connects (src/stack.ts says why not
    // a NativeConnection). With a codec it must encrypt too (the workers' results are ciphertext).
    ...(api.codec ? { codec: api.codec.codec } : {}),
    connection,
    nativeConnection: env.nativeConnection,
    api: {
      payments: {
        timings: { ...testTimings, ...api.timings },
        ...(api.operationWaitMs === undefined ? {} : { operationWaitMs: api.operationWaitMs }),
        // Provider names only: the capabilities and the retry presets are the workers'.
        providers: ['simulator', ...Object.keys(extraProviders)],
        ...(api.orderSingleFlight === undefined ? {} : { orderSingleFlight: api.orderSingleFlight }),
        splitPaymentMerchants: (api.splitPaymentMerchants ?? []).map((m) => (m === 'a' ? a.id : b.id)),
        ...(api.merchantWebhooks ? { merchantEvents: true } : {}),
        ...(api.keyRecords ? { keyRecords: api.keyRecords } : {}),
        ...(api.orderClaims ? { orderClaims: api.orderClaims } : {}),
      },
      config: {
        API_TOKENS: [a, b].map((m) => ({ merchantId: m.id, token: m.token })),
        OPERATOR_TOKENS: [{ operatorId: operator.id, token: operator.token }],
        CODEC_TOKENS: [{ codecId: codecReader.id, token: codecReader.token }],
      },
      webhooks: webhookVerifiers({
        WEBHOOK_SECRET,
        WEBHOOK_TOLERANCE_S: 300,
        ...(stripeWebhookSecret === undefined ? {} : { STRIPE_WEBHOOK_SECRET: stripeWebhookSecret }),
      }),
      ...(api.apiMetrics ? { metrics: api.apiMetrics } : {}),
      ...(api.codec
        ? { codecCorsOrigins: api.codec.corsOrigins, codecTrustedOrigins: api.codec.trustedOrigins ?? [] }
        : {}),
      ...(api.wallets ? { wallets: api.wallets } : {}),
      ...(api.merchantWebhooks
        ? { webhookEndpoints: { endpoints: api.merchantWebhooks.endpoints, allowPrivateUrls: true } }
        : {}),
    },
    workers: workers(api.workers !== false),
  }));
  const { app, payments, url } = stack.api as RunningApi;
  await atSimulator(api.webhooks === false ? undefined : `${url}/webhooks/simulator`);

  return {
    ...base,
    url,
    app,
    payments,
    a,
    b,
    operator,
    codecReader,
    async anotherApi() {
      return (await stack.startApi()).url;
    },
    async request(method, path, o = {}) {
      const headers: Record<string, string> = { ...o.headers };
      const token = o.token === undefined ? a.token : o.token;
      if (token !== null) headers.authorization = `Bearer ${token}`;
      if (o.key !== undefined) headers['idempotency-key'] = o.key;
      const body = o.rawBody ?? (o.body === undefined ? undefined : JSON.stringify(o.body));
      if (body !== undefined) headers['content-type'] ??= 'application/json';
      const res = await fetch(`${o.baseUrl ?? url}${path}`, { method, headers, body });
      const text = await res.text();
      return { status: res.status, headers: res.headers, body: text ? (JSON.parse(text) as ApiResponse['body']) : {} };
    },
    startWorkers: () => stack.startWorkers(),
    ...(stripeMock ? { stripeMock } : {}),
  };
}

/** A valid charge body for the API; override any field, with anything (validation tests send wrong ones). */
export const chargeBody = (over: Record<string, unknown> = {}): Record<string, unknown> => ({
  ...chargeRequest(),
  ...over,
});

/** A fresh idempotency key. */
export const newKey = (): string => `key_${randomUUID()}`;

/** A fresh wallet of the world's merchant A, credited through the API with `balance` EUR minor units. */
export async function fundedWallet(h: Pick<ApiWorld, 'request'>, balance: number): Promise<string> {
  const walletId = `w-${randomUUID().slice(0, 8)}`;
  const res = await h.request('POST', `/v1/wallets/${walletId}/credits`, {
    key: newKey(),
    body: { amount: { value: balance, currency: 'EUR' } },
  });
  if (res.status !== 200) throw new Error(`crediting ${walletId}: ${res.status} ${JSON.stringify(res.body)}`);
  return walletId;
}

/** A file's Temporal server and the worlds of its tests. */
export interface WorldFixture {
  /** The current test's Temporal environment (inside tests and hooks). */
  readonly env: TestWorkflowEnvironment;
  /** Starts a world (without the API) on {@link env}; it is closed after the test. */
  world(opts?: WorldOptions): Promise<World>;
}

function fixture(
  current: () => TestWorkflowEnvironment | undefined,
  opened: World[],
  defaults: WorldOptions = {},
): WorldFixture {
  const env = (): TestWorkflowEnvironment => {
    const e = current();
    if (e === undefined) throw new Error('no Temporal environment outside a test');
    return e;
  };
  const world = async (opts?: WorldOptions): Promise<World> => {
    const w = await startWorld(env(), { ...defaults, ...opts });
    opened.push(w);
    return w;
  };
  return {
    get env() {
      return env();
    },
    world,
  };
}

async function closeAll(opened: World[]): Promise<void> {
  for (const w of opened.splice(0)) await w.close();
}

/**
 * A time-skipping test server per test (about 0.3 s): awaiting a result lets the server skip to the next timer of *any*
 * workflow, so one test's long timers would move the next test's clock by years.
 */
export function timeSkippingServerPerTest(): WorldFixture {
  let env: TestWorkflowEnvironment | undefined;
  const opened: World[] = [];
  beforeEach(async () => {
    env = await createTimeSkippingEnv();
  });
  afterEach(async () => {
    await closeAll(opened);
    await env?.teardown();
    env = undefined;
  });
  return fixture(() => env, opened);
}

/**
 * One server for the whole file (default the run's shared dev server; `start` e.g. a dev server with its own dynamic
 * config), torn down after the file; worlds (with `defaults` under their options) closed after each test.
 */
export function serverPerFile(
  start: () => Promise<TestWorkflowEnvironment> = connectDevServer,
  defaults?: WorldOptions,
): WorldFixture {
  let env: TestWorkflowEnvironment | undefined;
  const opened: World[] = [];
  beforeAll(async () => {
    env = await start();
  });
  afterEach(async () => {
    await closeAll(opened);
  });
  afterAll(async () => {
    await closeAll(opened);
    await env?.teardown();
  });
  return fixture(() => env, opened, defaults);
}
