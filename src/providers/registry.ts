/**
 * The providers this deployment runs, built from the configuration: the simulator's REST adapter always, Stripe when
 * `STRIPE_SECRET_KEY` is set; and their webhook verifiers for the API (`POST /webhooks/:provider`).
 */
import type { Logger } from './logging';
import { createProvider } from './rest/adapter';
import { SimulatorWebhookVerifier } from './rest/webhook';
import { defaultReferenceLookupPages } from '../domain/retry';
import { StripeProvider, stripeCapabilities } from './stripe/adapter';
import { StripeWebhookVerifier } from './stripe/webhook';
import type { PaymentProvider, WebhookVerifier } from './types';

/** The settings the adapters are built from (a subset of src/config/'s `Config`). */
export interface ProvidersConfig {
  readonly SIMULATOR_URL: string;
  readonly PROVIDER_API_KEY: string;
  readonly PROVIDER_CONNECT_TIMEOUT_MS: number;
  readonly PROVIDER_TOTAL_TIMEOUT_MS: number;
  /** Absent: the HTTP client's default cap. */
  readonly PROVIDER_MAX_RETRY_AFTER_MS?: number;
  readonly providerCapabilities: PaymentProvider['capabilities'];
  readonly STRIPE_SECRET_KEY?: string;
  readonly STRIPE_API_BASE?: string;
}

/** The adapters of every configured provider, by name. */
export function createConfiguredProviders(config: ProvidersConfig, logger: Logger): Record<string, PaymentProvider> {
  const maxRetryAfterMs = config.PROVIDER_MAX_RETRY_AFTER_MS;
  const retryAfterCap = maxRetryAfterMs === undefined ? {} : { maxRetryAfterMs };
  const providers: Record<string, PaymentProvider> = {
    simulator: createProvider(
      {
        name: 'simulator',
        baseUrl: config.SIMULATOR_URL,
        apiKey: config.PROVIDER_API_KEY,
        capabilities: config.providerCapabilities,
        connectTimeoutMs: config.PROVIDER_CONNECT_TIMEOUT_MS,
        totalTimeoutMs: config.PROVIDER_TOTAL_TIMEOUT_MS,
        ...retryAfterCap,
      },
      logger,
    ),
  };
  if (config.STRIPE_SECRET_KEY !== undefined) {
    providers.stripe = new StripeProvider({
      secretKey: config.STRIPE_SECRET_KEY,
      ...(config.STRIPE_API_BASE === undefined ? {} : { apiBase: config.STRIPE_API_BASE }),
      connectTimeoutMs: config.PROVIDER_CONNECT_TIMEOUT_MS,
      totalTimeoutMs: config.PROVIDER_TOTAL_TIMEOUT_MS,
      ...retryAfterCap,
      logger,
    });
  }
  return providers;
}

/**
 * The capabilities of every configured provider without building a client (the API passes them in each payment's input;
 * the worker checks them against its adapter's own before anything is sent).
 */
export function configuredCapabilities(
  config: Pick<ProvidersConfig, 'providerCapabilities' | 'STRIPE_SECRET_KEY' | 'PROVIDER_TOTAL_TIMEOUT_MS'>,
): Record<string, PaymentProvider['capabilities']> {
  return {
    simulator: config.providerCapabilities,
    ...(config.STRIPE_SECRET_KEY === undefined
      ? {}
      : {
          stripe: {
            ...stripeCapabilities(),
            callLimits: {
              callTimeoutMs: config.PROVIDER_TOTAL_TIMEOUT_MS,
              referencePages: defaultReferenceLookupPages,
            },
          },
        }),
  };
}

/** The settings the webhook verifiers need. */
export interface WebhooksConfig {
  readonly WEBHOOK_SECRET: string;
  readonly WEBHOOK_TOLERANCE_S: number;
  readonly STRIPE_WEBHOOK_SECRET?: string;
}

/** One webhook verifier per provider whose secret is configured. */
export function webhookVerifiers(config: WebhooksConfig): Record<string, WebhookVerifier> {
  const verifiers: Record<string, WebhookVerifier> = {
    simulator: new SimulatorWebhookVerifier({ secret: config.WEBHOOK_SECRET, toleranceS: config.WEBHOOK_TOLERANCE_S }),
  };
  if (config.STRIPE_WEBHOOK_SECRET !== undefined) {
    verifiers.stripe = new StripeWebhookVerifier({
      secret: config.STRIPE_WEBHOOK_SECRET,
      toleranceS: config.WEBHOOK_TOLERANCE_S,
    });
  }
  return verifiers;
}
