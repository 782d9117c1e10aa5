/**
 * Every setting, read once from the environment and validated by zod. `loadConfig(env)` is pure:
 * tests pass a plain object. Defaults suit development; with `NODE_ENV=production` the secrets must be set explicitly.
 */
import type { PayloadKeys } from '../codec';
import type { MerchantWebhookSettings } from '../domain/merchant-events';
import { type RetryCapabilities, type RetryOverrides, defaultReferenceLookupPages } from '../domain/retry';
import { defaultSweepLookbackMs } from '../domain/sweep';
import { PaymentTimings } from '../domain/workflow-inputs';
import {
  type Credentials,
  derivedLogHashSecret,
  developmentDefaults,
  readCredentials,
  readPayloadKeys,
  requireProductionSecrets,
} from './credentials';
import { type Env, EnvSchema } from './env';
import { type ConfigIssue, ConfigError, type RawEnv, issuesOf } from './issues';
import { type ProviderLimits, providerLimitVariable, readProviderLimits } from './limits';
import { readMerchantWebhooks } from './merchant-webhooks';
import { checkRetrySettings, readPerOperationRetry, retryVariables, withSharedRetrySettings } from './retry';

export { ConfigError, type ConfigIssue } from './issues';
export { developmentDefaults } from './credentials';
export { type ProviderLimits } from './limits';
export { retryVariables } from './retry';

/**
 * The providers the worker builds, by name (it names each provider's activity task queue); the first is the one a
 * charge without `provider` goes to. Always the REST provider at SIMULATOR_URL, named `simulator`; `stripe` too when
 * STRIPE_SECRET_KEY is set. The API refuses any other name (400) instead of starting a payment no worker serves.
 */
export const configuredProviders = (env: { readonly STRIPE_SECRET_KEY?: string | undefined }): string[] =>
  env.STRIPE_SECRET_KEY === undefined ? ['simulator'] : ['simulator', 'stripe'];

/** Whether {@link loadConfig} reads the variable `name` (deployments check the names they set against it). */
export const readsVariable = (name: string): boolean =>
  name in EnvSchema.shape || retryVariables.includes(name) || providerLimitVariable.test(name);

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
  | 'MERCHANT_WEBHOOK_ALLOW_PRIVATE_URLS'
> &
  Credentials & {
    /** The payload encryption keys (`PAYLOAD_KEYS`, parsed). */
    readonly payloadKeys: PayloadKeys;
    readonly SIMULATOR_URL: string;
    readonly SWEEP_LOOKBACK_MS: number;
    readonly PROVIDER_API_KEY: string;
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
    /** How merchant webhooks are delivered (`MERCHANT_WEBHOOK_*`). */
    readonly merchantWebhooks: MerchantWebhookSettings;
    /** `MERCHANT_WEBHOOK_ALLOW_PRIVATE_URLS`, its default applied. */
    readonly MERCHANT_WEBHOOK_ALLOW_PRIVATE_URLS: boolean;
  };

/** Parses and cross-checks the configuration; throws a {@link ConfigError} listing every problem. */
export function loadConfig(env: Readonly<Record<string, string | undefined>> = process.env): Config {
  const raw: RawEnv = Object.fromEntries(
    Object.entries(env).filter((entry): entry is [string, string] => entry[1] !== undefined && entry[1].trim() !== ''),
  );
  const issues: ConfigIssue[] = [];
  const parsed = EnvSchema.safeParse(raw);
  if (!parsed.success) issues.push(...issuesOf(parsed.error));
  const perOperation = readPerOperationRetry(raw, issues);
  const providerLimits = readProviderLimits(raw, issues);
  const production = raw.NODE_ENV === 'production';
  requireProductionSecrets(raw, production, issues);
  const credentials = readCredentials(raw, production, issues);
  const payloadKeys = readPayloadKeys(raw, issues);
  if (!parsed.success || payloadKeys === undefined) throw new ConfigError(issues);
  const e = parsed.data;

  const retry = withSharedRetrySettings(perOperation, e);
  const timings = readTimings(e, issues);
  const providerCapabilities = simulatorProviderCapabilities(e);
  if (e.PROVIDER_CONNECT_TIMEOUT_MS > e.PROVIDER_TOTAL_TIMEOUT_MS) {
    issues.push({ variable: 'PROVIDER_CONNECT_TIMEOUT_MS', message: 'must not exceed PROVIDER_TOTAL_TIMEOUT_MS' });
  }
  checkRetrySettings(retry, providerCapabilities, e, issues);
  const merchantWebhooks = readMerchantWebhooks(e, production, issues);
  const sweepLookbackMs = e.SWEEP_LOOKBACK_MS ?? defaultSweepLookbackMs(e.SETTLE_WINDOW_MS);
  if (sweepLookbackMs < e.SETTLE_WINDOW_MS) {
    issues.push({
      variable: 'SWEEP_LOOKBACK_MS',
      message: 'must be at least SETTLE_WINDOW_MS, or the sweep flags payments whose outcome is still in flight',
    });
  }
  if (issues.length > 0 || credentials === undefined || timings === undefined) throw new ConfigError(issues);

  // The raw key string stays out of the config object (it may be printed); only the parsed ring goes on.
  const { PAYLOAD_KEYS: _rawKeys, CODEC_TOKENS: _rawCodecTokens, LOG_HASH_SECRET: logHashSecret, ...settings } = e;
  return {
    ...settings,
    SIMULATOR_URL: e.SIMULATOR_URL ?? `http://127.0.0.1:${e.SIMULATOR_PORT}`,
    SWEEP_LOOKBACK_MS: sweepLookbackMs,
    payloadKeys,
    PROVIDER_API_KEY: e.PROVIDER_API_KEY ?? developmentDefaults.PROVIDER_API_KEY,
    ...credentials,
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
    timings,
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
    merchantWebhooks,
    MERCHANT_WEBHOOK_ALLOW_PRIVATE_URLS: e.MERCHANT_WEBHOOK_ALLOW_PRIVATE_URLS ?? !production,
  };
}

/** Every delay of the payment workflows, checked against each other (the reconcile schedule against the sweep's). */
function readTimings(e: Env, issues: ConfigIssue[]): PaymentTimings | undefined {
  const timings = PaymentTimings.safeParse({
    submitWaitMs: e.SUBMIT_WAIT_MS,
    reconcileScheduleMs: e.RECONCILE_SCHEDULE_MS,
    settleWindowMs: e.SETTLE_WINDOW_MS,
    authorizationExpiryMs: e.AUTH_EXPIRY_MS,
    refundWindowMs: e.REFUND_WINDOW_MS,
    unknownSweepThresholdMs: e.UNKNOWN_SWEEP_THRESHOLD_MS,
    customerActionTimeoutMs: e.CUSTOMER_ACTION_TIMEOUT_MS,
  });
  if (timings.success) return timings.data;
  issues.push(
    ...timings.error.issues.map((i) => ({
      variable: i.path[0] === 'unknownSweepThresholdMs' ? 'UNKNOWN_SWEEP_THRESHOLD_MS' : 'RECONCILE_SCHEDULE_MS',
      message: i.message,
    })),
  );
  return undefined;
}

/** The capabilities of the REST provider at SIMULATOR_URL as the worker's adapter has them. */
function simulatorProviderCapabilities(e: Env): Config['providerCapabilities'] {
  const callLimits = { callTimeoutMs: e.PROVIDER_TOTAL_TIMEOUT_MS, referencePages: defaultReferenceLookupPages };
  return e.PROVIDER_IDEMPOTENCY
    ? {
        idempotencyKeys: true,
        keyTtlSeconds: e.PROVIDER_KEY_TTL_S,
        lookupByKey: true,
        lookupByReference: true,
        callLimits,
      }
    : { idempotencyKeys: false, keyTtlSeconds: null, lookupByKey: false, lookupByReference: true, callLimits };
}
