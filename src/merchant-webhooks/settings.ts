/** The retry schedule of merchant webhooks (the settings themselves are the domain's: the config reads them). */
import type { MerchantWebhookSettings } from '../domain/merchant-events';

export { type MerchantWebhookSettings, defaultMerchantWebhookSettings } from '../domain/merchant-events';

/** How long past its attempt's bound a claimed event stays with its round (a round whose worker died releases it then). */
export const leaseMarginMs = 5_000;

/**
 * The wait before the next attempt of an event that failed `attempts` times: exponential, drawn from the upper half of
 * its step (so a merchant's retries do not return together), never below what the endpoint asked for (Retry-After),
 * never above the cap.
 */
export function retryDelayMs(
  attempts: number,
  backoff: MerchantWebhookSettings['backoff'],
  random: () => number = Math.random,
  retryAfterMs?: number,
): number {
  const step = Math.min(backoff.maxMs, backoff.initialMs * 2 ** Math.max(0, attempts - 1));
  const drawn = Math.round(step / 2 + (random() * step) / 2);
  return Math.min(backoff.maxMs, Math.max(drawn, retryAfterMs ?? 0));
}
