import { proxyActivities, proxyLocalActivities } from '@temporalio/workflow';
import type { Activities } from '../activities';
import {
  type ProviderOperation,
  type RetryOverrides,
  type RetrySpec,
  nonRetryableErrorTypesFor,
  retrySpecFor,
  toActivityOptions,
} from '../domain/retry-policy';
import { providerTaskQueue } from '../domain/ids';
import { activitySummary } from '../domain/summaries';
import type { ProviderCapabilities } from '../domain/provider-payment';

/** Reads the provider's capability flags on the workflow's own worker; recorded in history, so replay-safe. */
export const { describeProvider } = proxyLocalActivities<Activities>({
  startToCloseTimeout: '5s',
  scheduleToCloseTimeout: '1m',
  retry: { maximumInterval: '5s' },
});

/** Shape 3's default bound on the charge's local first attempt: short, so a slow provider holds a local slot briefly. */
export const defaultLocalAttemptTimeoutMs = 3_000;

/** Metadata sent with a charge so the provider's webhooks name the payment's workflow (never customer data). */
export const paymentMetadata = (merchantId: string, key: string): Record<string, string> => ({
  merchant_id: merchantId,
  payment_key: key,
});

/**
 * Typed activity proxies for one provider, each operation with the retry policy its safety allows against that
 * provider, all on the provider's own task queue (bulkhead).
 */
export function providerActivities(
  workflowTaskQueue: string,
  provider: string,
  capabilities: ProviderCapabilities,
  retry?: RetryOverrides,
  /** Shape 3: the bound of the create's local first attempt (see `localAttemptTimeoutMs`); absent: no local attempt. */
  localAttemptTimeoutMs?: number,
) {
  const taskQueue = providerTaskQueue(workflowTaskQueue, provider);
  const createSpec = retrySpecFor('create', capabilities, retry?.create);
  const localMs =
    localAttemptTimeoutMs === undefined || !capabilities.idempotencyKeys
      ? undefined
      : Math.min(localAttemptTimeoutMs, createSpec.attemptTimeoutMs);
  const optionsFor = (operation: ProviderOperation) => {
    const spec = retrySpecFor(operation, capabilities, retry?.[operation]);
    // The summary names the step in the web UI's event history (user metadata: no effect on replay).
    return { ...toActivityOptions(spec, spec.safety), taskQueue, summary: activitySummary(operation, provider) };
  };
  return {
    write: {
      createPayment: proxyActivities<Activities>(optionsFor('create')).createPayment,
      capturePayment: proxyActivities<Activities>(optionsFor('capture')).capturePayment,
      voidPayment: proxyActivities<Activities>(optionsFor('void')).voidPayment,
      refundPayment: proxyActivities<Activities>(optionsFor('refund')).refundPayment,
    },
    lookup: {
      lookupPayment: proxyActivities<Activities>(optionsFor('lookup')).lookupPayment,
      listProviderPayments: proxyActivities<Activities>(optionsFor('list')).listProviderPayments,
    },
    /**
     * The create's first attempt as a local activity on the workflow's own worker, only against a provider that
     * honours idempotency keys (so the regular activity may send the same key again after any outcome of it): bounded
     * by the attempt timeout, and no local retry (every retry belongs to the regular activity, on the bulkhead queue).
     */
    localCreatePayment: localMs === undefined ? undefined : localCreate(localMs, createSpec.safety, provider),
    /**
     * The create after a local first attempt: the same activity on the same queue, that attempt counted (one attempt
     * fewer, the budget less the local attempt's bound); absent when the local attempt was the only one allowed.
     */
    createAfterLocal:
      localMs === undefined || createSpec.maximumAttempts === 1
        ? undefined
        : proxyActivities<Activities>({
            ...toActivityOptions(afterLocalSpec(createSpec, localMs), createSpec.safety),
            taskQueue,
            summary: activitySummary('create', provider),
          }).createPayment,
    /** The create budget: a resend with the same key must land before the provider forgets the key. */
    createBudgetMs: createSpec.budgetMs,
  };
}

/** The create's spec once a local attempt of at most `localMs` was made: one attempt and that time fewer. */
function afterLocalSpec(spec: RetrySpec, localMs: number): RetrySpec {
  return {
    ...spec,
    ...(spec.maximumAttempts === undefined ? {} : { maximumAttempts: spec.maximumAttempts - 1 }),
    budgetMs: Math.max(spec.attemptTimeoutMs, spec.budgetMs - localMs),
  };
}

function localCreate(timeoutMs: number, safety: ReturnType<typeof retrySpecFor>['safety'], provider: string) {
  return proxyLocalActivities<Activities>({
    startToCloseTimeout: timeoutMs,
    scheduleToCloseTimeout: timeoutMs,
    retry: { maximumAttempts: 1, nonRetryableErrorTypes: nonRetryableErrorTypesFor(safety) },
    summary: `${activitySummary('create', provider)} (local first attempt)`,
  }).createPayment;
}
