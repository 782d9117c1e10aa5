/** The environment's variables, one schema: each parsed on its own, with its default. */
import { z } from 'zod';
import { defaultCustomerActionTimeoutMs } from '../domain/customer-action';
import { defaultMerchantWebhookSettings } from '../domain/merchant-events';
import { defaultMaxRetryAfterMs } from '../domain/retry';
import { defaultSweepIntervalMs } from '../domain/sweep';
import { defaultPaymentTimings } from '../domain/workflow-inputs';
import {
  boolean,
  hostPort,
  listenAddress,
  merchantList,
  ms,
  msList,
  nonEmpty,
  originList,
  port,
  secret,
  wholeNumber,
} from './values';

export const EnvSchema = z.object({
  NODE_ENV: z.string().optional(),
  TEMPORAL_ADDRESS: hostPort.default('127.0.0.1:7233'),
  TEMPORAL_NAMESPACE: nonEmpty.default('default'),
  /**
   * How long a worker or API process waits at start for an unreachable Temporal server (restarting, or started after
   * it) before it gives up with exit 1; 0 gives up at the first refusal.
   */
  TEMPORAL_CONNECT_WAIT_MS: ms.default(60_000),
  TASK_QUEUE: nonEmpty.default('payments'),
  PORT: port.default(3000),
  /** The API's listen address: loopback unless deployed (docker-compose sets 0.0.0.0). */
  HOST: nonEmpty.default('127.0.0.1'),
  SIMULATOR_PORT: port.default(4010),
  /** Base URL of the provider API; default `http://127.0.0.1:<SIMULATOR_PORT>`. */
  SIMULATOR_URL: z.url({ protocol: /^https?$/, message: 'must be an http(s) URL' }).optional(),
  PROVIDER_API_KEY: secret.optional(),
  PROVIDER_KEY_TTL_S: wholeNumber(1, 10 * 365 * 86_400).default(86_400),
  /** Whether the provider honours idempotency keys (the simulator merchant's `idempotency` flag). */
  PROVIDER_IDEMPOTENCY: boolean.default(true),
  PROVIDER_CONNECT_TIMEOUT_MS: ms.default(2_000),
  /** Stripe's secret key (`sk_test_...`); set: the worker also serves the `stripe` provider. */
  STRIPE_SECRET_KEY: secret.optional(),
  /** Stripe's webhook endpoint secret (`whsec_...`); set: the API accepts `POST /webhooks/stripe`. */
  STRIPE_WEBHOOK_SECRET: secret.optional(),
  /** Where the Stripe API is (default https://api.stripe.com); stripe-mock in tests. */
  STRIPE_API_BASE: z.url({ protocol: /^https?$/, message: 'must be an http(s) URL' }).optional(),
  PROVIDER_TOTAL_TIMEOUT_MS: ms.default(10_000),
  /**
   * The longest Retry-After the worker takes from a provider: a 429/503 asking for more pauses every write to the
   * provider (the cool-down) and retries after this long instead, so one answer cannot hold a provider for hours.
   */
  PROVIDER_MAX_RETRY_AFTER_MS: ms.default(defaultMaxRetryAfterMs),
  API_TOKENS: z.string().optional(),
  /** Operator tokens; without them in production no one can resolve through the API. */
  OPERATOR_TOKENS: z.string().optional(),
  /** One open payment per order: a new key for an order whose payment is pending/unknown is 409. */
  ORDER_SINGLE_FLIGHT: boolean.default(true),
  /** Merchants exempt from ORDER_SINGLE_FLIGHT (they split an order into several payments). */
  SPLIT_PAYMENT_MERCHANTS: merchantList.default([]),
  WEBHOOK_SECRET: secret.optional(),
  /** Webhooks older than this are rejected (replay protection). */
  WEBHOOK_TOLERANCE_S: wholeNumber(1, 86_400).default(300),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  SUBMIT_WAIT_MS: ms.default(defaultPaymentTimings.submitWaitMs),
  RECONCILE_SCHEDULE_MS: msList.default([...defaultPaymentTimings.reconcileScheduleMs]),
  SETTLE_WINDOW_MS: ms.default(defaultPaymentTimings.settleWindowMs),
  AUTH_EXPIRY_MS: ms.default(defaultPaymentTimings.authorizationExpiryMs),
  REFUND_WINDOW_MS: ms.default(defaultPaymentTimings.refundWindowMs),
  UNKNOWN_SWEEP_THRESHOLD_MS: ms.default(defaultPaymentTimings.unknownSweepThresholdMs),
  /** How long a payment waits for the customer (3-D Secure) before it is cancelled and declined `action_expired`. */
  CUSTOMER_ACTION_TIMEOUT_MS: ms.default(defaultCustomerActionTimeoutMs),
  /** How often the reconcile sweep schedule runs (whole seconds: the schedule's resolution). */
  SWEEP_INTERVAL_MS: wholeNumber(1_000, Number.MAX_SAFE_INTEGER).default(defaultSweepIntervalMs),
  /** How far behind each sweep run its provider window ends; default twice SETTLE_WINDOW_MS. */
  SWEEP_LOOKBACK_MS: ms.optional(),
  /** Retry overrides for every operation. */
  RETRY_INITIAL_INTERVAL_MS: ms.optional(),
  RETRY_MAX_INTERVAL_MS: ms.optional(),
  RETRY_BACKOFF_COEFFICIENT: z
    .string()
    .regex(/^\d+(\.\d+)?$/, { message: 'must be a number' })
    .transform(Number)
    .pipe(z.number().min(1).max(100))
    .optional(),
  RETRY_JITTER: z.enum(['full', 'none']).optional(),
  /** The breaker store every worker shares; absent: each worker keeps its breaker in-process. */
  REDIS_URL: z.url({ protocol: /^rediss?$/, message: 'must be a redis:// or rediss:// URL' }).optional(),
  REDIS_KEY_PREFIX: nonEmpty.default('pw:breaker:'),
  /** Consecutive provider failures (unavailable, unknown, not sent) that open the breaker. */
  BREAKER_FAILURE_THRESHOLD: wholeNumber(1, 1_000_000).default(5),
  /** Also open at this failure rate over BREAKER_WINDOW_MS, once BREAKER_WINDOW_MIN_CALLS calls were seen. */
  BREAKER_WINDOW_MS: ms.default(60_000),
  BREAKER_WINDOW_FAILURE_RATE: z
    .string()
    .regex(/^(0(\.\d+)?|1(\.0+)?)$/, { message: 'must be a rate between 0 and 1' })
    .transform(Number)
    .pipe(z.number().gt(0, { message: 'must be above 0' }))
    .default(0.5),
  BREAKER_WINDOW_MIN_CALLS: wholeNumber(1, 1_000_000).default(20),
  /** How long an open breaker refuses writes before one probe; how long that probe may be out. */
  BREAKER_OPEN_MS: ms.default(30_000),
  BREAKER_PROBE_TIMEOUT_MS: ms.optional(),
  /** Up to this much random delay on top of every breaker refusal, so the waiting writes do not return together. */
  BREAKER_JITTER_MS: wholeNumber(0, 600_000).default(1_000),
  /** Payload encryption keys, `kid:base64(32 bytes)` comma separated; the first encrypts, all decrypt (src/codec). */
  PAYLOAD_KEYS: z.string().optional(),
  /** The web UI origins allowed to call the codec endpoints (CORS), comma separated. */
  CODEC_CORS_ORIGINS: originList.default(['http://127.0.0.1:8233', 'http://localhost:8233']),
  /** Decode-only tokens for `POST /codec/decode` (an auth proxy in front of the web UI, scripts): `codecId:token`. */
  CODEC_TOKENS: z.string().optional(),
  /**
   * Browser origins whose requests may decode without any token (a web UI that sends no credential of ours, as
   * `npm start`'s does); refused in production, where the UI's auth proxy presents a `CODEC_TOKENS` token instead.
   */
  CODEC_TRUSTED_ORIGINS: originList.default([]),
  /** The key of the keyed hash (HMAC-SHA-256) that logs carry instead of idempotency keys; default derived. */
  LOG_HASH_SECRET: z.string().min(16, { message: 'must be at least 16 characters' }).optional(),
  /**
   * Payments each worker process keeps in memory between their workflow tasks (the SDK's workflow cache): its memory
   * grows with it, not with the open payments (a payment out of the cache is replayed from its history at its next
   * task). Absent: the SDK's default from the heap limit (2,310 with Node's 4 GiB default). At least 1: a worker
   * without a cache evicts a payment in the middle of its first task while its local activities are out (a cluster
   * soak with one such worker: 31 "This is an SDK bug" errors from sdk-core, SDK 1.24.0); sdk-rust#1482 describes the
   * livelock that can become (the task's markers lost, the task timed out and run again, indefinitely).
   */
  WORKER_MAX_CACHED_WORKFLOWS: wholeNumber(1, 1_000_000).optional(),
  /** The worker's own metrics (prom-client) at http://<address>/metrics, or `off`. */
  WORKER_METRICS_ADDRESS: listenAddress.default('127.0.0.1:9465'),
  /** PostgreSQL of wallets and key records (`postgres://user:password@host:port/db`); absent: no wallets. */
  DATABASE_URL: z.url({ protocol: /^postgres(ql)?$/, message: 'must be a postgres:// URL' }).optional(),
  /** Connections of each worker and API process. */
  DATABASE_POOL_SIZE: wholeNumber(1, 1_000).default(10),
  /** Server-side bound on one statement, lock waits included. */
  DATABASE_STATEMENT_TIMEOUT_MS: wholeNumber(100, 600_000).default(5_000),
  /** How long a key's first answer is kept (key records), whatever the Temporal namespace retention. */
  KEY_RETENTION_DAYS: wholeNumber(1, 3_650).default(31),
  /** How often each worker deletes expired key records. */
  KEY_RECORD_PRUNE_INTERVAL_MS: wholeNumber(60_000, 7 * 86_400_000).default(3_600_000),
  /** The Temporal SDK runtime's metrics (Prometheus exporter) at http://<address>/metrics, or `off`. */
  SDK_METRICS_ADDRESS: listenAddress.default('127.0.0.1:9464'),
  /** A prebuilt workflow bundle the worker loads (production, the cluster); absent: it bundles at start-up. */
  WORKFLOW_BUNDLE_PATH: nonEmpty.optional(),
  /** Payments announce status changes and refunds to merchants' webhook endpoints (needs DATABASE_URL). */
  MERCHANT_WEBHOOKS: boolean.default(true),
  /** One POST to a merchant's endpoint, connect to the last byte. */
  MERCHANT_WEBHOOK_TIMEOUT_MS: wholeNumber(100, 120_000).default(defaultMerchantWebhookSettings.attemptTimeoutMs),
  /** POSTs of one merchant in flight at once. */
  MERCHANT_WEBHOOK_CONCURRENCY: wholeNumber(1, 64).default(defaultMerchantWebhookSettings.concurrencyPerMerchant),
  /** The wait after a failed POST: doubling from this ... */
  MERCHANT_WEBHOOK_BACKOFF_INITIAL_MS: ms.default(defaultMerchantWebhookSettings.backoff.initialMs),
  /** ... up to this. */
  MERCHANT_WEBHOOK_BACKOFF_MAX_MS: ms.default(defaultMerchantWebhookSettings.backoff.maxMs),
  /** How long an event is retried (at least 3 days when NODE_ENV=production). */
  MERCHANT_WEBHOOK_RETRY_FOR_MS: ms.default(defaultMerchantWebhookSettings.retryForMs),
  /** Activity slots of each worker's webhook worker: merchants whose events it delivers at once. */
  MERCHANT_WEBHOOK_WORKER_SLOTS: wholeNumber(1, 10_000).default(100),
  /** How long delivered, given-up and discarded events stay in the database (redelivery, audit). */
  MERCHANT_WEBHOOK_RETENTION_DAYS: wholeNumber(1, 3_650).default(30),
  /** Accept endpoint URLs on this machine or a private network; default: yes, except when NODE_ENV=production. */
  MERCHANT_WEBHOOK_ALLOW_PRIVATE_URLS: boolean.optional(),
});

/** The variables as parsed. */
export type Env = z.output<typeof EnvSchema>;
