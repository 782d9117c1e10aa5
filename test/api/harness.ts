/**
 * An API test rig: the real API over HTTP (Fastify listening on 127.0.0.1:0), the real PaymentsClient, the real
 * simulator (webhooks pointed at the API), the real REST provider and the real workers on a fresh task queue, against
 * the run's shared dev server.
 */
import { randomUUID } from 'node:crypto';
import type { PayloadCodec } from '@temporalio/common';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { Connection } from '@temporalio/client';
import type { FastifyInstance } from 'fastify';
import pino from 'pino';
import { type CircuitBreaker, InMemoryCircuitBreaker } from '../../src/breaker';
import type { PaymentsClient } from '../../src/client';
import type { RetryOverrides } from '../../src/domain/retry';
import type { PaymentTimings } from '../../src/domain/workflow-inputs';
import { type PaymentProvider, createProvider, simulatorCapabilities, webhookVerifiers } from '../../src/providers';
import { type RunningSimulator, startSimulator } from '../../src/simulator/server';
import type { ApiMetrics } from '../../src/metrics/api-metrics';
import type { WorkerMetrics } from '../../src/metrics/worker-metrics';
import { type RunningApi, type WorkerSetup, startStack } from '../../src/stack';
import type { KeyRecords } from '../../src/key-records';
import type { WalletLedger } from '../../src/wallets';
import type { StackWorkers } from '../../src/stack';
import type { WebhookEndpoints } from '../../src/merchant-webhooks';
import { workflowBundle } from '../helpers/payments';
import { type Probe, eventually as poll } from '../helpers/eventually';

/** Real-time timings: a reconcile waits a minute first, so an unknown payment stays unknown during a test. */
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

/** One merchant of the rig with its bearer token. */
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

/** Options of {@link ApiHarness.request}. */
export interface RequestOptions {
  readonly token?: string | null;
  readonly key?: string;
  readonly body?: unknown;
  readonly rawBody?: string;
  readonly headers?: Record<string, string>;
  /** Another API instance's URL (default: the first one's). */
  readonly baseUrl?: string;
}

/** The rig's operator: its id and bearer token (config `OPERATOR_TOKENS`). */
export interface TestOperator {
  readonly id: string;
  readonly token: string;
}

export interface ApiHarness {
  readonly env: TestWorkflowEnvironment;
  readonly sim: RunningSimulator;
  readonly apiKey: string;
  readonly taskQueue: string;
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
  /** Starts the workers when the rig was started without them (`workers: false`); no-op otherwise. */
  startWorkers(): Promise<void>;
  /** Effects and requests the simulator recorded for this rig's api key. */
  ledger(): ReturnType<RunningSimulator['ledger']>;
  close(): Promise<void>;
}

export interface HarnessOptions {
  readonly timings?: Partial<PaymentTimings>;
  /**
   * The workers' retry presets (`RETRY_*`; default {@link testRetry}): every payment the API starts records them in
   * its first workflow task and runs with them (shape 3). The API holds none.
   */
  readonly retry?: RetryOverrides;
  /** Point the simulator's webhooks at the API (default true). */
  readonly webhooks?: boolean;
  /** Register the sweep's activities with the workers, as the worker process does. */
  readonly sweep?: boolean;
  /** One open payment per order (default true, as in production). */
  readonly orderSingleFlight?: boolean;
  /** Start the workers with the rig (default true); `false`: none poll the task queue until `startWorkers()`. */
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
  /** Metrics registries of the API and the workers (default: their own, unread). */
  readonly apiMetrics?: ApiMetrics;
  readonly workerMetrics?: WorkerMetrics;
  /** Providers beside the simulator (e.g. `stripe` over stripe-mock), each with its own activity worker. */
  readonly extraProviders?: Readonly<Record<string, PaymentProvider>>;
  /** Stripe's webhook endpoint secret for the API (`STRIPE_WEBHOOK_SECRET`); absent: `/webhooks/stripe` is 404. */
  readonly stripeWebhookSecret?: string;
  /** Per-provider activity limits and the default activity slots of each provider worker (as `createWorkers` takes). */
  readonly providerLimits?: WorkerSetup['providerLimits'];
  readonly maxConcurrentActivityTaskExecutions?: number;
  /** The workers' breaker (default: one that never opens, see below). */
  readonly breaker?: CircuitBreaker;
  /** The longest Retry-After the simulator's adapter takes (`PROVIDER_MAX_RETRY_AFTER_MS`; default its own). */
  readonly maxRetryAfterMs?: number;
  /** The wallet ledger (a test database's) for the API's `/v1/wallets` and the workers' wallet activities. */
  readonly wallets?: WalletLedger;
  /**
   * Webhooks to merchants (a test database's endpoint table and event queue): payments announce their events, the
   * API serves `/v1/webhook-endpoint` (private URLs allowed: the receivers are on 127.0.0.1), the workers deliver.
   */
  readonly merchantWebhooks?: NonNullable<StackWorkers['merchantWebhooks']> & { readonly endpoints: WebhookEndpoints };
  /** Key records (a test database's): payments hand their keys' first answers over, the API answers repeats from them. */
  readonly keyRecords?: KeyRecords;
}

/** Starts simulator, workers and API; every test file gets its own. */
export async function startApiHarness(env: TestWorkflowEnvironment, opts: HarnessOptions = {}): Promise<ApiHarness> {
  const logger = pino({ level: process.env.TEST_LOG_LEVEL ?? 'silent' });
  const sim = await startSimulator({ port: 0, webhookRetry: { attempts: 3, baseDelayMs: 200 } });
  const apiKey = `sk_test_${randomUUID()}`;
  const provider = createProvider(
    {
      name: 'simulator',
      baseUrl: sim.url,
      apiKey,
      capabilities: simulatorCapabilities(),
      connectTimeoutMs: 500,
      totalTimeoutMs: 1_500,
      ...(opts.maxRetryAfterMs === undefined ? {} : { maxRetryAfterMs: opts.maxRetryAfterMs }),
    },
    logger,
  );
  const taskQueue = `api-test-${randomUUID()}`;
  const a = { id: `ma_${randomUUID().slice(0, 8)}`, token: `tok_a_${randomUUID()}` };
  const b = { id: `mb_${randomUUID().slice(0, 8)}`, token: `tok_b_${randomUUID()}` };
  const operator = { id: `ops_${randomUUID().slice(0, 8)}`, token: `tok_ops_${randomUUID()}` };
  const codecReader = { id: `ui_${randomUUID().slice(0, 8)}`, token: `tok_codec_${randomUUID()}` };
  const apiConnection = await Connection.connect({ address: env.address });
  const stack = await startStack({
    logger,
    namespace: env.namespace ?? 'default',
    taskQueue,
    // The API's client over a grpc-js connection of its own, as src/api-main.ts connects (src/stack.ts says why not
    // a NativeConnection). With a codec it must encrypt too (the workers' results are ciphertext).
    ...(opts.codec ? { codec: opts.codec.codec } : {}),
    connection: apiConnection,
    nativeConnection: env.nativeConnection,
    api: {
      payments: {
        timings: { ...testTimings, ...opts.timings },
        // Provider names only: the capabilities and the retry presets are the workers' (below).
        providers: ['simulator', ...Object.keys(opts.extraProviders ?? {})],
        ...(opts.orderSingleFlight === undefined ? {} : { orderSingleFlight: opts.orderSingleFlight }),
        splitPaymentMerchants: (opts.splitPaymentMerchants ?? []).map((m) => (m === 'a' ? a.id : b.id)),
        ...(opts.merchantWebhooks ? { merchantEvents: true } : {}),
        ...(opts.keyRecords ? { keyRecords: opts.keyRecords } : {}),
      },
      config: {
        API_TOKENS: [a, b].map((m) => ({ merchantId: m.id, token: m.token })),
        OPERATOR_TOKENS: [{ operatorId: operator.id, token: operator.token }],
        CODEC_TOKENS: [{ codecId: codecReader.id, token: codecReader.token }],
      },
      webhooks: webhookVerifiers({
        WEBHOOK_SECRET,
        WEBHOOK_TOLERANCE_S: 300,
        ...(opts.stripeWebhookSecret === undefined ? {} : { STRIPE_WEBHOOK_SECRET: opts.stripeWebhookSecret }),
      }),
      ...(opts.apiMetrics ? { metrics: opts.apiMetrics } : {}),
      ...(opts.codec
        ? { codecCorsOrigins: opts.codec.corsOrigins, codecTrustedOrigins: opts.codec.trustedOrigins ?? [] }
        : {}),
      ...(opts.wallets ? { wallets: opts.wallets } : {}),
      ...(opts.merchantWebhooks
        ? { webhookEndpoints: { endpoints: opts.merchantWebhooks.endpoints, allowPrivateUrls: true } }
        : {}),
    },
    workers: {
      providers: { simulator: provider, ...opts.extraProviders },
      workflows: { workflowBundle: await workflowBundle() },
      ...(opts.sweep ? { sweep: true } : {}),
      ...(opts.workerMetrics ? { metrics: opts.workerMetrics } : {}),
      ...(opts.providerLimits === undefined ? {} : { providerLimits: opts.providerLimits }),
      // The workers' own presets: the payments run with these (as the worker process passes its RETRY_*).
      retry: opts.retry ?? testRetry,
      ...(opts.maxConcurrentActivityTaskExecutions === undefined
        ? {}
        : { maxConcurrentActivityTaskExecutions: opts.maxConcurrentActivityTaskExecutions }),
      // The tests of one file share these workers and inject provider faults one after another; a breaker tripped by
      // one test would fail the next test's payments fast. The breaker has its own tests (test/activities).
      breaker: opts.breaker ?? new InMemoryCircuitBreaker({ failureThreshold: Number.MAX_SAFE_INTEGER }),
      start: opts.workers !== false,
      ...(opts.wallets ? { wallets: opts.wallets } : {}),
      ...(opts.merchantWebhooks ? { merchantWebhooks: opts.merchantWebhooks } : {}),
      ...(opts.keyRecords ? { keyRecords: opts.keyRecords } : {}),
    },
  });
  const { app, payments, url } = stack.api as RunningApi;
  await sim.setMerchant(apiKey, {
    idempotency: true,
    ...(opts.webhooks === false ? {} : { webhook_url: `${url}/webhooks/simulator`, webhook_secret: WEBHOOK_SECRET }),
  });

  return {
    env,
    sim,
    apiKey,
    taskQueue,
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
    ledger: () => sim.ledger(apiKey),
    async close() {
      await sim.flushWebhooks().catch(() => undefined);
      await stack.close();
      await provider.close();
      await sim.close();
      await apiConnection.close();
    },
  };
}

/** A valid charge body; override any field. */
export const chargeBody = (over: Record<string, unknown> = {}): Record<string, unknown> => ({
  orderId: `order_${randomUUID()}`,
  amount: { value: 1_000, currency: 'EUR' },
  paymentMethod: 'pm_card_visa',
  ...over,
});

/** A fresh idempotency key. */
export const newKey = (): string => `key_${randomUUID()}`;

/** The kit's poller (test/helpers/eventually.ts) with the API tests' bound: 10 s unless a test says otherwise. */
export const eventually = <T>(what: string, probe: Probe<T>, timeoutMs = 10_000): Promise<T> =>
  poll(what, probe, timeoutMs, 100);
