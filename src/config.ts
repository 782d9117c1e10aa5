/**
 * Every setting, read once from the environment and validated by zod (DESIGN.md layout). `loadConfig(env)` is pure:
 * tests pass a plain object. Defaults suit development; with `NODE_ENV=production` the secrets must be set explicitly.
 */
import { hkdfSync } from 'node:crypto';
import { z } from 'zod';
import { type PayloadKeys, PayloadKeysError, parsePayloadKeys } from './codec';
import { MerchantId } from './domain/payment';
import {
  ProviderOperation,
  assertResendWindowWithinKeyTtl,
  callsPerAttempt,
  defaultMaxRetryAfterMs,
  defaultReferenceLookupPages,
  defaultRetrySpecs,
  minAttemptTimeoutMs,
  retrySpecFor,
  writeOperations,
  type RetryCapabilities,
  type RetryOverrides,
  type RetrySpec,
} from './domain/retry';
import { defaultSweepIntervalMs, defaultSweepLookbackMs } from './domain/sweep';
import { defaultCustomerActionTimeoutMs } from './domain/customer-action';
import { PaymentTimings, defaultPaymentTimings, reconcileWindowMs } from './domain/workflow-inputs';

/** One problem with one variable. Values are never echoed: some variables are secrets. */
export interface ConfigIssue {
  readonly variable: string;
  readonly message: string;
}

/** Thrown by {@link loadConfig}: every problem at once, one line per variable. */
export class ConfigError extends Error {
  readonly issues: readonly ConfigIssue[];

  constructor(issues: readonly ConfigIssue[]) {
    super(`Invalid configuration:\n${issues.map((i) => `  ${i.variable}: ${i.message}`).join('\n')}`);
    this.name = 'ConfigError';
    this.issues = issues;
  }
}

const wholeNumber = (min: number, max: number) =>
  z
    .string()
    .regex(/^\d+$/, { message: 'must be a whole number' })
    .transform(Number)
    .pipe(
      z
        .number()
        .int()
        .min(min, { message: `must be at least ${min}` })
        .max(max, { message: `must be at most ${max}` }),
    );
const port = wholeNumber(0, 65_535);
const ms = wholeNumber(1, Number.MAX_SAFE_INTEGER);
const boolean = z
  .enum(['true', 'false', '1', '0', 'yes', 'no'], { message: 'must be true or false' })
  .transform((v) => v === 'true' || v === '1' || v === 'yes');
const msList = z
  .string()
  .transform((v) => v.split(',').map((part) => part.trim()))
  .pipe(
    z
      .array(z.string().regex(/^\d+$/, { message: 'must be a comma-separated list of whole milliseconds' }))
      .min(1)
      .transform((parts) => parts.map(Number)),
  )
  .pipe(z.array(z.number().int().positive({ message: 'every delay must be positive' })));
const hostPort = z.string().regex(/^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+):\d{1,5}$/, { message: 'must be host:port' });
const nonEmpty = z.string().min(1);
const secret = z.string().min(8, { message: 'must be at least 8 characters' });

/** A bearer token an API client presents: no separators, no whitespace. */
const ApiToken = z.string().regex(/^[A-Za-z0-9._~+/=-]{16,256}$/, {
  message: 'every token must be 16-256 characters of A-Z a-z 0-9 . _ ~ + / = -',
});

/** An operator's id: recorded in audits as `operator:<operatorId>`. */
const OperatorId = z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, {
  message: 'operatorId must be 1-64 characters of A-Z, a-z, 0-9, _ or -',
});

/** `<id>:token,<id>:token`: several tokens may map to one id; a token maps to exactly one. */
const tokenPairs = (idSchema: z.ZodType<string>, idName: string) =>
  z.string().transform((v, ctx) => {
    const pairs: { id: string; token: string }[] = [];
    for (const entry of v
      .split(',')
      .map((e) => e.trim())
      .filter((e) => e.length > 0)) {
      const colon = entry.indexOf(':');
      const id = idSchema.safeParse(colon === -1 ? '' : entry.slice(0, colon));
      const token = ApiToken.safeParse(colon === -1 ? '' : entry.slice(colon + 1));
      if (colon === -1) ctx.addIssue({ code: 'custom', message: `every entry must be ${idName}:token` });
      else if (!id.success) ctx.addIssue({ code: 'custom', message: id.error.issues[0]?.message ?? '' });
      else if (!token.success) ctx.addIssue({ code: 'custom', message: token.error.issues[0]?.message ?? '' });
      else pairs.push({ id: id.data, token: token.data });
    }
    if (pairs.length === 0 && ctx.issues.length === 0)
      ctx.addIssue({ code: 'custom', message: `no ${idName}:token pair` });
    if (new Set(pairs.map((p) => p.token)).size !== pairs.length) {
      ctx.addIssue({ code: 'custom', message: 'a token is listed twice' });
    }
    return pairs;
  });

/** `merchantId:token,merchantId:token` (config `API_TOKENS`). */
const apiTokens = tokenPairs(MerchantId, 'merchantId').transform((pairs) =>
  pairs.map(({ id, token }) => ({ merchantId: id, token })),
);
/** `operatorId:token,operatorId:token` (config `OPERATOR_TOKENS`). */
const operatorTokens = tokenPairs(OperatorId, 'operatorId').transform((pairs) =>
  pairs.map(({ id, token }) => ({ operatorId: id, token })),
);

/** `codecId:token,codecId:token` (config `CODEC_TOKENS`): decode-only tokens. */
const codecTokens = tokenPairs(OperatorId, 'codecId').transform((pairs) =>
  pairs.map(({ id, token }) => ({ codecId: id, token })),
);

/** `m1,m2`: merchant ids, comma separated. */
const merchantList = z
  .string()
  .transform((v) =>
    v
      .split(',')
      .map((part) => part.trim())
      .filter((part) => part.length > 0),
  )
  .pipe(z.array(MerchantId));

/**
 * The providers the worker builds, by name (it names each provider's activity task queue); the first is the one a
 * charge without `provider` goes to. Always the REST provider at SIMULATOR_URL, named `simulator`; `stripe` too when
 * STRIPE_SECRET_KEY is set. The API refuses any other name (400) instead of starting a payment no worker serves.
 */
export const configuredProviders = (env: { readonly STRIPE_SECRET_KEY?: string | undefined }): string[] =>
  env.STRIPE_SECRET_KEY === undefined ? ['simulator'] : ['simulator', 'stripe'];

/** Development-only defaults for the secrets; never used when NODE_ENV=production. */
export const developmentDefaults = {
  PROVIDER_API_KEY: 'sk_dev_payment_workflows',
  API_TOKENS: 'dev_merchant:pw_dev_token_change_me',
  OPERATOR_TOKENS: 'dev_operator:pw_dev_operator_token_change_me',
  WEBHOOK_SECRET: 'whsec_dev_payment_workflows',
  /** A fixed development key (base64 of 32 bytes): anyone with this repository can decrypt what it encrypted. */
  PAYLOAD_KEYS: 'dev1:cGF5bWVudC13b3JrZmxvd3MtZGV2LWtleS0zMmJ5dGU=',
} as const;

/** `http://127.0.0.1:8233,http://localhost:8233`: browser origins (scheme://host[:port]), comma separated. */
const originList = z
  .string()
  .transform((v) =>
    v
      .split(',')
      .map((part) => part.trim())
      .filter((part) => part.length > 0),
  )
  .pipe(
    z.array(z.string().regex(/^https?:\/\/[^/\s]+$/, { message: 'each origin must be scheme://host[:port], no path' })),
  );

/** `host:port` to listen on, or `off`. */
const listenAddress = z.union([z.literal('off'), hostPort]);

const EnvSchema = z.object({
  NODE_ENV: z.string().optional(),
  TEMPORAL_ADDRESS: hostPort.default('127.0.0.1:7233'),
  TEMPORAL_NAMESPACE: nonEmpty.default('default'),
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
});

/** `PROVIDER_<NAME>_MAX_RPS` / `PROVIDER_<NAME>_MAX_CONCURRENCY`: per-provider activity limits. */
const providerLimitVariable = /^PROVIDER_([A-Z0-9_]+)_MAX_(RPS|CONCURRENCY)$/;

/** One provider's activity limits: fleet-wide rate (enforced by the Temporal server) and per-worker concurrency. */
export interface ProviderLimits {
  /** `maxTaskQueueActivitiesPerSecond` of the provider's activity task queue: for all workers together. */
  readonly maxRps?: number;
  /** `maxConcurrentActivityTaskExecutions` of each worker's activity worker for that provider. */
  readonly maxConcurrency?: number;
}

const perOperationSuffixes = {
  BUDGET_MS: 'budgetMs',
  ATTEMPT_TIMEOUT_MS: 'attemptTimeoutMs',
  MAX_ATTEMPTS: 'maximumAttempts',
} as const satisfies Record<string, keyof RetrySpec>;

/** `RETRY_<OPERATION>_<SETTING>`, e.g. `RETRY_CREATE_BUDGET_MS`, `RETRY_LOOKUP_ATTEMPT_TIMEOUT_MS`. */
export const retryVariables: readonly string[] = ProviderOperation.options.flatMap((op) =>
  Object.keys(perOperationSuffixes).map((suffix) => `RETRY_${op.toUpperCase()}_${suffix}`),
);

/** Whether {@link loadConfig} reads the variable `name` (deployments check the names they set against it). */
export const readsVariable = (name: string): boolean =>
  name in EnvSchema.shape || retryVariables.includes(name) || providerLimitVariable.test(name);

type Env = z.output<typeof EnvSchema>;

/** The validated configuration: every variable under its own name, parsed, plus what is derived from them. */
export type Config = Omit<
  Env,
  | 'SIMULATOR_URL'
  | 'PROVIDER_API_KEY'
  | 'API_TOKENS'
  | 'OPERATOR_TOKENS'
  | 'WEBHOOK_SECRET'
  | 'SWEEP_LOOKBACK_MS'
  | 'PAYLOAD_KEYS'
  | 'CODEC_TOKENS'
  | 'LOG_HASH_SECRET'
> & {
  /** The payload encryption keys (`PAYLOAD_KEYS`, parsed). */
  readonly payloadKeys: PayloadKeys;
  readonly SIMULATOR_URL: string;
  readonly SWEEP_LOOKBACK_MS: number;
  readonly PROVIDER_API_KEY: string;
  readonly API_TOKENS: readonly { readonly merchantId: string; readonly token: string }[];
  /** Empty in production unless set: no development operator token there. */
  readonly OPERATOR_TOKENS: readonly { readonly operatorId: string; readonly token: string }[];
  /** Decode-only codec tokens; none unless set. */
  readonly CODEC_TOKENS: readonly { readonly codecId: string; readonly token: string }[];
  /**
   * The key of the keyed hash of idempotency keys in logs: `LOG_HASH_SECRET`, else derived (HKDF-SHA-256) from the
   * current payload key, a secret every deployment has (the development one is in this repository).
   */
  readonly LOG_HASH_SECRET: string;
  /** The provider names the worker serves (see {@link configuredProviders}); the API refuses any other (400). */
  readonly providers: readonly string[];
  /** The provider of a charge that names none. */
  readonly defaultProvider: string;
  readonly WEBHOOK_SECRET: string;
  /** Whether the development defaults for secrets are in use (say so loudly at start-up). */
  readonly usingDevelopmentSecrets: boolean;
  readonly timings: PaymentTimings;
  /**
   * The worker's retry presets (`RETRY_*`): every payment records them in its first workflow task (shape 3), and the
   * sweep runs with them. The API process does not read them (validated here all the same: one environment, one check).
   */
  readonly retry: RetryOverrides;
  /** The configured provider's capabilities, as the simulator-backed REST provider has them (the worker's adapter). */
  readonly providerCapabilities: RetryCapabilities & {
    readonly lookupByKey: boolean;
    readonly lookupByReference: boolean;
  };
  /** Circuit-breaker policy (the store is Redis when REDIS_URL is set). */
  readonly breaker: {
    readonly failureThreshold: number;
    readonly window: { readonly durationMs: number; readonly failureRate: number; readonly minimumCalls: number };
    readonly cooldownMs: number;
    readonly probeTimeoutMs: number;
    readonly jitterMs: number;
  };
  /** By provider name in lower case (`PROVIDER_SIMULATOR_MAX_RPS` -> `simulator`). */
  readonly providerLimits: Readonly<Record<string, ProviderLimits>>;
};

/** A log-hash key derived from the current payload key (HKDF-SHA-256, its own label): never the key itself. */
const derivedLogHashSecret = (keys: PayloadKeys): string =>
  Buffer.from(hkdfSync('sha256', keys.current.key, Buffer.alloc(0), 'payment-workflows log key hash', 32)).toString(
    'base64',
  );

const issuesOf = (error: z.ZodError, fallbackVariable?: string): ConfigIssue[] =>
  error.issues.map((issue) => ({
    variable: typeof issue.path[0] === 'string' ? issue.path[0] : (fallbackVariable ?? '(config)'),
    message: issue.message,
  }));

/** Parses and cross-checks the configuration; throws a {@link ConfigError} listing every problem. */
export function loadConfig(env: Readonly<Record<string, string | undefined>> = process.env): Config {
  // An empty value (`FOO=` in a compose file) means "not set".
  const raw = Object.fromEntries(
    Object.entries(env).filter((entry): entry is [string, string] => entry[1] !== undefined && entry[1].trim() !== ''),
  );
  const issues: ConfigIssue[] = [];
  const parsed = EnvSchema.safeParse(raw);
  if (!parsed.success) issues.push(...issuesOf(parsed.error));

  // Per-operation retry overrides.
  const retry: Partial<Record<ProviderOperation, Partial<RetrySpec>>> = {};
  const perOpNumber = wholeNumber(1, Number.MAX_SAFE_INTEGER);
  for (const op of ProviderOperation.options) {
    for (const [suffix, field] of Object.entries(perOperationSuffixes)) {
      const variable = `RETRY_${op.toUpperCase()}_${suffix}`;
      const value = raw[variable];
      if (value === undefined) continue;
      const result = perOpNumber.safeParse(value);
      if (result.success) retry[op] = { ...retry[op], [field]: result.data };
      else issues.push(...issuesOf(result.error, variable));
    }
  }
  const providerLimits: Record<string, { maxRps?: number; maxConcurrency?: number }> = {};
  const rps = z
    .string()
    .regex(/^\d+(\.\d+)?$/, { message: 'must be a number of activities per second' })
    .transform(Number)
    .pipe(z.number().gt(0, { message: 'must be above 0' }));
  for (const [variable, value] of Object.entries(raw)) {
    const m = providerLimitVariable.exec(variable);
    if (!m?.[1]) continue;
    const name = m[1].toLowerCase();
    const result = (m[2] === 'RPS' ? rps : wholeNumber(1, 10_000)).safeParse(value);
    if (!result.success) issues.push(...issuesOf(result.error, variable));
    else
      providerLimits[name] = { ...providerLimits[name], [m[2] === 'RPS' ? 'maxRps' : 'maxConcurrency']: result.data };
  }
  const production = raw.NODE_ENV === 'production';
  for (const name of ['PROVIDER_API_KEY', 'API_TOKENS', 'WEBHOOK_SECRET', 'PAYLOAD_KEYS'] as const) {
    if (production && raw[name] === undefined) {
      issues.push({ variable: name, message: 'is required when NODE_ENV=production (no development default)' });
    }
  }
  const tokens = apiTokens.safeParse(raw.API_TOKENS ?? developmentDefaults.API_TOKENS);
  if (!tokens.success) issues.push(...issuesOf(tokens.error, 'API_TOKENS'));
  // In production no operator token unless one is configured: a development default there would be a known password.
  const operatorSource = raw.OPERATOR_TOKENS ?? (production ? undefined : developmentDefaults.OPERATOR_TOKENS);
  const operators = operatorSource === undefined ? undefined : operatorTokens.safeParse(operatorSource);
  if (operators && !operators.success) issues.push(...issuesOf(operators.error, 'OPERATOR_TOKENS'));
  if (tokens.success && operators?.success) {
    const merchantTokens = new Set(tokens.data.map((t) => t.token));
    if (operators.data.some((o) => merchantTokens.has(o.token))) {
      issues.push({ variable: 'OPERATOR_TOKENS', message: 'a token is both a merchant token and an operator token' });
    }
  }
  const codecReaders = raw.CODEC_TOKENS === undefined ? undefined : codecTokens.safeParse(raw.CODEC_TOKENS);
  if (codecReaders && !codecReaders.success) issues.push(...issuesOf(codecReaders.error, 'CODEC_TOKENS'));
  if (codecReaders?.success) {
    const others = new Set([
      ...(tokens.success ? tokens.data.map((t) => t.token) : []),
      ...(operators?.success ? operators.data.map((o) => o.token) : []),
    ]);
    if (codecReaders.data.some((c) => others.has(c.token))) {
      issues.push({ variable: 'CODEC_TOKENS', message: 'a codec token is also a merchant or operator token' });
    }
  }
  if (production && raw.CODEC_TRUSTED_ORIGINS !== undefined) {
    issues.push({
      variable: 'CODEC_TRUSTED_ORIGINS',
      message: 'is for development only: in production the web UI’s auth proxy presents a CODEC_TOKENS token',
    });
  }
  let payloadKeys: PayloadKeys | undefined;
  try {
    payloadKeys = parsePayloadKeys(raw.PAYLOAD_KEYS ?? developmentDefaults.PAYLOAD_KEYS);
  } catch (err) {
    if (!(err instanceof PayloadKeysError)) throw err;
    issues.push({ variable: 'PAYLOAD_KEYS', message: err.message });
  }
  if (!parsed.success || payloadKeys === undefined) throw new ConfigError(issues);
  const e = parsed.data;

  const shared: Partial<RetrySpec> = {
    ...(e.RETRY_INITIAL_INTERVAL_MS === undefined ? {} : { initialIntervalMs: e.RETRY_INITIAL_INTERVAL_MS }),
    ...(e.RETRY_MAX_INTERVAL_MS === undefined ? {} : { maximumIntervalMs: e.RETRY_MAX_INTERVAL_MS }),
    ...(e.RETRY_BACKOFF_COEFFICIENT === undefined ? {} : { backoffCoefficient: e.RETRY_BACKOFF_COEFFICIENT }),
    ...(e.RETRY_JITTER === undefined ? {} : { jitter: e.RETRY_JITTER }),
  };
  if (Object.keys(shared).length > 0) {
    for (const op of ProviderOperation.options) retry[op] = { ...shared, ...retry[op] };
  }

  const timingsResult = PaymentTimings.safeParse({
    submitWaitMs: e.SUBMIT_WAIT_MS,
    reconcileScheduleMs: e.RECONCILE_SCHEDULE_MS,
    settleWindowMs: e.SETTLE_WINDOW_MS,
    authorizationExpiryMs: e.AUTH_EXPIRY_MS,
    refundWindowMs: e.REFUND_WINDOW_MS,
    unknownSweepThresholdMs: e.UNKNOWN_SWEEP_THRESHOLD_MS,
    customerActionTimeoutMs: e.CUSTOMER_ACTION_TIMEOUT_MS,
  });
  if (!timingsResult.success) {
    issues.push(
      ...timingsResult.error.issues.map((i) => ({
        variable: i.path[0] === 'unknownSweepThresholdMs' ? 'UNKNOWN_SWEEP_THRESHOLD_MS' : 'RECONCILE_SCHEDULE_MS',
        message: i.message,
      })),
    );
  }

  const callLimits = { callTimeoutMs: e.PROVIDER_TOTAL_TIMEOUT_MS, referencePages: defaultReferenceLookupPages };
  const providerCapabilities = e.PROVIDER_IDEMPOTENCY
    ? {
        idempotencyKeys: true,
        keyTtlSeconds: e.PROVIDER_KEY_TTL_S,
        lookupByKey: true,
        lookupByReference: true,
        callLimits,
      }
    : { idempotencyKeys: false, keyTtlSeconds: null, lookupByKey: false, lookupByReference: true, callLimits };

  if (e.PROVIDER_CONNECT_TIMEOUT_MS > e.PROVIDER_TOTAL_TIMEOUT_MS) {
    issues.push({ variable: 'PROVIDER_CONNECT_TIMEOUT_MS', message: 'must not exceed PROVIDER_TOTAL_TIMEOUT_MS' });
  }
  const resubmitWindowMs = reconcileWindowMs({ reconcileScheduleMs: e.RECONCILE_SCHEDULE_MS });
  for (const op of ProviderOperation.options) {
    const variable = retry[op] === undefined ? 'RETRY_*' : `RETRY_${op.toUpperCase()}_*`;
    // One attempt may make several calls (look-up pages before a resend, the write, the read after a refund), each
    // bounded by the HTTP deadline: an attempt timeout below their sum lets Temporal give an attempt up while its
    // calls still go out, and the next attempt's look-up can miss them.
    const calls = callsPerAttempt(op, providerCapabilities);
    const minimumMs = minAttemptTimeoutMs(op, providerCapabilities) ?? 0;
    const why = `one ${op} attempt may make ${calls} call(s) of up to PROVIDER_TOTAL_TIMEOUT_MS (${e.PROVIDER_TOTAL_TIMEOUT_MS} ms) each, so it needs at least ${minimumMs} ms`;
    const explicitAttemptMs = retry[op]?.attemptTimeoutMs;
    if (explicitAttemptMs !== undefined && explicitAttemptMs < minimumMs) {
      issues.push({
        variable: `RETRY_${op.toUpperCase()}_ATTEMPT_TIMEOUT_MS`,
        message: `is ${explicitAttemptMs} ms, but ${why}; an attempt cut off by Temporal is never classified`,
      });
      continue;
    }
    const budgetMs = retry[op]?.budgetMs ?? defaultRetrySpecs[op].budgetMs;
    if (budgetMs < minimumMs) {
      const budgetVariable = `RETRY_${op.toUpperCase()}_BUDGET_MS`;
      issues.push(
        retry[op]?.budgetMs === undefined
          ? {
              variable: 'PROVIDER_TOTAL_TIMEOUT_MS',
              message: `${why}, more than the ${op} budget (${budgetMs} ms; raise ${budgetVariable} or lower this)`,
            }
          : { variable: budgetVariable, message: `is ${budgetMs} ms, but ${why}: not even one attempt fits` },
      );
      continue;
    }
    let spec: RetrySpec;
    try {
      spec = retrySpecFor(op, providerCapabilities, retry[op]);
    } catch (err) {
      issues.push({ variable, message: err instanceof Error ? err.message : String(err) });
      continue;
    }
    if ((writeOperations as readonly string[]).includes(op)) {
      try {
        assertResendWindowWithinKeyTtl(spec, providerCapabilities, resubmitWindowMs);
      } catch (err) {
        issues.push({
          variable: `PROVIDER_KEY_TTL_S`,
          message: `${op}: ${err instanceof Error ? err.message : String(err)} (see RETRY_${op.toUpperCase()}_BUDGET_MS, RECONCILE_SCHEDULE_MS)`,
        });
      }
    }
  }

  const sweepLookbackMs = e.SWEEP_LOOKBACK_MS ?? defaultSweepLookbackMs(e.SETTLE_WINDOW_MS);
  if (sweepLookbackMs < e.SETTLE_WINDOW_MS) {
    issues.push({
      variable: 'SWEEP_LOOKBACK_MS',
      message: 'must be at least SETTLE_WINDOW_MS, or the sweep flags payments whose outcome is still in flight',
    });
  }

  if (
    issues.length > 0 ||
    !tokens.success ||
    operators?.success === false ||
    codecReaders?.success === false ||
    !timingsResult.success
  ) {
    throw new ConfigError(issues);
  }

  // The raw key string stays out of the config object (it may be printed); only the parsed ring goes on.
  const { PAYLOAD_KEYS: _rawKeys, CODEC_TOKENS: _rawCodecTokens, LOG_HASH_SECRET: logHashSecret, ...settings } = e;
  return {
    ...settings,
    SIMULATOR_URL: e.SIMULATOR_URL ?? `http://127.0.0.1:${e.SIMULATOR_PORT}`,
    SWEEP_LOOKBACK_MS: sweepLookbackMs,
    payloadKeys,
    PROVIDER_API_KEY: e.PROVIDER_API_KEY ?? developmentDefaults.PROVIDER_API_KEY,
    API_TOKENS: tokens.data,
    OPERATOR_TOKENS: operators?.success ? operators.data : [],
    CODEC_TOKENS: codecReaders?.success ? codecReaders.data : [],
    LOG_HASH_SECRET: logHashSecret ?? derivedLogHashSecret(payloadKeys),
    providers: configuredProviders(e),
    defaultProvider: 'simulator',
    WEBHOOK_SECRET: e.WEBHOOK_SECRET ?? developmentDefaults.WEBHOOK_SECRET,
    usingDevelopmentSecrets:
      e.PROVIDER_API_KEY === undefined ||
      e.API_TOKENS === undefined ||
      e.WEBHOOK_SECRET === undefined ||
      e.PAYLOAD_KEYS === undefined ||
      (!production && e.OPERATOR_TOKENS === undefined),
    timings: timingsResult.data,
    retry,
    providerCapabilities,
    breaker: {
      failureThreshold: e.BREAKER_FAILURE_THRESHOLD,
      window: {
        durationMs: e.BREAKER_WINDOW_MS,
        failureRate: e.BREAKER_WINDOW_FAILURE_RATE,
        minimumCalls: e.BREAKER_WINDOW_MIN_CALLS,
      },
      cooldownMs: e.BREAKER_OPEN_MS,
      probeTimeoutMs: e.BREAKER_PROBE_TIMEOUT_MS ?? e.BREAKER_OPEN_MS,
      jitterMs: e.BREAKER_JITTER_MS,
    },
    providerLimits,
  };
}
