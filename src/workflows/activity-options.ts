import { proxyActivities, proxyLocalActivities } from '@temporalio/workflow';
import type { Activities } from '../activities';
import {
  type ProviderOperation,
  type RetryOverrides,
  type RetrySpec,
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

/** Reads the worker's view of a provider (capabilities, retry presets) on the workflow's own worker (shape 3). */
export const { describeWorkerProvider } = proxyLocalActivities<Activities>({
  startToCloseTimeout: '5s',
  scheduleToCloseTimeout: '1m',
  retry: { maximumInterval: '5s' },
});

/**
 * How long past its bound a local first attempt may take before Temporal times it out: the activity aborts its own
 * provider call at the bound and answers with the worker's view; Temporal's timeout is the backstop for a stuck worker.
 */
export const localAttemptMarginMs = 2_000;

/**
 * A shape-3 charge's first step, a local activity on the workflow's own worker (see `firstCreateAttempt`): the
 * worker's view of the provider and, where it may, the create's first attempt, bounded by `boundMs` (the worker
 * shortens it to one attempt of its create preset). No local retry: every retry belongs to the regular activity, on
 * the provider's queue.
 */
export const firstCreateAttempt = (boundMs: number, provider: string, withWallet = false) =>
  proxyLocalActivities<Activities>({
    startToCloseTimeout: boundMs + localAttemptMarginMs + (withWallet ? walletFirstStepsMs : 0),
    scheduleToCloseTimeout: boundMs + localAttemptMarginMs + (withWallet ? walletFirstStepsMs : 0),
    retry: { maximumAttempts: 1 },
    summary: withWallet
      ? `hold the wallet part, ${activitySummary('create', provider)} (local first attempt), settle the wallet part`
      : `${activitySummary('create', provider)} (local first attempt)`,
  }).firstCreateAttempt;

/**
 * What a split payment's first step may take beyond its attempt: its hold and its settlement, each one statement that
 * the database's statement timeout (5 s) and the driver's query timeout (a second more) bound.
 */
const walletFirstStepsMs = 12_000;

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
  /** Shape 3: a local first create attempt of at most this long was made (`localFirstAttemptMs`); absent: none. */
  localMs?: number,
) {
  const taskQueue = providerTaskQueue(workflowTaskQueue, provider);
  const createSpec = retrySpecFor('create', capabilities, retry?.create);
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
    /** Each write's budget, for the same reason: a reconcile resends a create, a capture or a refund. */
    writeBudgetMs: (operation: 'create' | 'capture' | 'refund'): number =>
      retrySpecFor(operation, capabilities, retry?.[operation]).budgetMs,
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
