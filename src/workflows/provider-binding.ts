import { workflowInfo } from '@temporalio/workflow';
import type { ProviderCapabilities } from '../domain/provider-payment';
import { type RetryOverrides, localFirstAttemptMs } from '../domain/retry-policy';
import { describeProvider, providerActivities } from './activity-options';

/** The provider activities of one binding: its writes, its look-ups, the create after a local first attempt. */
export type ProviderActivities = ReturnType<typeof providerActivities>;

/**
 * What a payment recorded of its provider's configuration: the capabilities and the retry presets every activity,
 * reconcile and continuation runs with (the starter's in older history shapes, the worker's view in shape 3).
 */
export interface RecordedProviderConfig {
  readonly capabilities: ProviderCapabilities;
  readonly retry?: RetryOverrides;
}

/**
 * The provider a payment deals with, bound: its name, the configuration the payment recorded for it, and the
 * activities on its own task queue (bulkhead, breaker) with the retry policies that configuration allows; after a
 * local first create attempt of at most `localMs`, the create that takes over from it (one attempt fewer).
 */
export class ProviderBinding {
  readonly acts: ProviderActivities;

  private constructor(
    readonly provider: string,
    readonly config: RecordedProviderConfig,
    localMs?: number,
  ) {
    this.acts = providerActivities(workflowInfo().taskQueue, provider, config.capabilities, config.retry, localMs);
  }

  /** Bound to a configuration the payment has (its input, its continuation, the worker's view its first step recorded). */
  static of(provider: string, config: RecordedProviderConfig): ProviderBinding {
    return new ProviderBinding(provider, config);
  }

  /**
   * Bound to the worker's view a shape-3 charge's first step recorded, after a local first create attempt: its bound
   * (the starter's `localAttemptTimeoutMs`, at most one attempt of the create preset) comes off the create's budget.
   */
  static afterLocalAttempt(
    provider: string,
    config: RecordedProviderConfig,
    localAttemptTimeoutMs: number | undefined,
  ): ProviderBinding {
    const localMs = localFirstAttemptMs(localAttemptTimeoutMs, config.capabilities, config.retry);
    return new ProviderBinding(provider, config, localMs);
  }

  /** Bound to `provider` as the workflow's own worker describes it (a local activity: recorded, replay-safe). */
  static async described(provider: string, retry: RetryOverrides | undefined): Promise<ProviderBinding> {
    return new ProviderBinding(provider, { capabilities: await describeProvider(provider), retry });
  }

  get capabilities(): ProviderCapabilities {
    return this.config.capabilities;
  }

  get retry(): RetryOverrides | undefined {
    return this.config.retry;
  }
}
