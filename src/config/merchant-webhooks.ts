/** How merchant webhooks are delivered (`MERCHANT_WEBHOOK_*`), checked against each other and production's floor. */
import {
  type MerchantWebhookSettings,
  defaultMerchantWebhookSettings,
  minimumRetryForMs,
} from '../domain/merchant-events';
import type { Env } from './env';
import type { ConfigIssue } from './issues';

/** The delivery settings from the environment; a retry window under 3 days in production, or backoff bounds reversed, are issues. */
export function readMerchantWebhooks(e: Env, production: boolean, issues: ConfigIssue[]): MerchantWebhookSettings {
  if (production && e.MERCHANT_WEBHOOK_RETRY_FOR_MS < minimumRetryForMs) {
    issues.push({ variable: 'MERCHANT_WEBHOOK_RETRY_FOR_MS', message: 'must be at least 3 days in production' });
  }
  if (e.MERCHANT_WEBHOOK_BACKOFF_INITIAL_MS > e.MERCHANT_WEBHOOK_BACKOFF_MAX_MS) {
    issues.push({
      variable: 'MERCHANT_WEBHOOK_BACKOFF_INITIAL_MS',
      message: 'must not exceed MERCHANT_WEBHOOK_BACKOFF_MAX_MS',
    });
  }
  return {
    ...defaultMerchantWebhookSettings,
    attemptTimeoutMs: e.MERCHANT_WEBHOOK_TIMEOUT_MS,
    concurrencyPerMerchant: e.MERCHANT_WEBHOOK_CONCURRENCY,
    backoff: { initialMs: e.MERCHANT_WEBHOOK_BACKOFF_INITIAL_MS, maxMs: e.MERCHANT_WEBHOOK_BACKOFF_MAX_MS },
    retryForMs: e.MERCHANT_WEBHOOK_RETRY_FOR_MS,
  };
}
