/** The retry settings (`RETRY_*`): each operation's own and the shared ones, checked against the configured provider. */
import {
  ProviderOperation,
  assertResendWindowWithinKeyTtl,
  callsPerAttempt,
  checkRetryPresets,
  defaultRetrySpecs,
  minAttemptTimeoutMs,
  writeOperations,
  type RetryCapabilities,
  type RetryOverrides,
  type RetrySpec,
} from '../domain/retry';
import { reconcileWindowMs } from '../domain/workflow-inputs';
import type { Env } from './env';
import { type ConfigIssue, type RawEnv, issuesOf } from './issues';
import { wholeNumber } from './values';

const perOperationSuffixes = {
  BUDGET_MS: 'budgetMs',
  ATTEMPT_TIMEOUT_MS: 'attemptTimeoutMs',
  MAX_ATTEMPTS: 'maximumAttempts',
} as const satisfies Record<string, keyof RetrySpec>;

/** `RETRY_<OPERATION>_<SETTING>`, e.g. `RETRY_CREATE_BUDGET_MS`, `RETRY_LOOKUP_ATTEMPT_TIMEOUT_MS`. */
export const retryVariables: readonly string[] = ProviderOperation.options.flatMap((op) =>
  Object.keys(perOperationSuffixes).map((suffix) => `RETRY_${op.toUpperCase()}_${suffix}`),
);

/** `RETRY_<OPERATION>_<SETTING>`: each operation's own budget, attempt timeout and attempts. */
export function readPerOperationRetry(
  raw: RawEnv,
  issues: ConfigIssue[],
): Partial<Record<ProviderOperation, Partial<RetrySpec>>> {
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
  return retry;
}

/** The `RETRY_*` settings of every operation under each operation's own (`RETRY_<OPERATION>_*` wins). */
export function withSharedRetrySettings(perOperation: RetryOverrides, e: Env): RetryOverrides {
  const shared: Partial<RetrySpec> = {
    ...(e.RETRY_INITIAL_INTERVAL_MS === undefined ? {} : { initialIntervalMs: e.RETRY_INITIAL_INTERVAL_MS }),
    ...(e.RETRY_MAX_INTERVAL_MS === undefined ? {} : { maximumIntervalMs: e.RETRY_MAX_INTERVAL_MS }),
    ...(e.RETRY_BACKOFF_COEFFICIENT === undefined ? {} : { backoffCoefficient: e.RETRY_BACKOFF_COEFFICIENT }),
    ...(e.RETRY_JITTER === undefined ? {} : { jitter: e.RETRY_JITTER }),
  };
  if (Object.keys(shared).length === 0) return perOperation;
  const retry: Partial<Record<ProviderOperation, Partial<RetrySpec>>> = { ...perOperation };
  for (const op of ProviderOperation.options) retry[op] = { ...shared, ...perOperation[op] };
  return retry;
}

/**
 * The retry presets against the configured provider, per operation, naming the variable to change: an explicit attempt
 * timeout below what one attempt's calls may take (workflow code would raise it silently), a budget that cannot hold
 * one such attempt, a spec {@link checkRetryPresets} refuses, and a last resend of a write after the provider forgot
 * its key.
 */
export function checkRetrySettings(
  retry: RetryOverrides,
  capabilities: RetryCapabilities,
  e: Env,
  issues: ConfigIssue[],
): void {
  const { specs, refusals } = checkRetryPresets(capabilities, retry);
  const resubmitWindowMs = reconcileWindowMs({ reconcileScheduleMs: e.RECONCILE_SCHEDULE_MS });
  for (const op of ProviderOperation.options) {
    // One attempt may make several calls (look-up pages before a resend, the write, the read after a refund), each
    // bounded by the HTTP deadline: an attempt timeout below their sum lets Temporal give an attempt up while its
    // calls still go out, and the next attempt's look-up can miss them.
    const calls = callsPerAttempt(op, capabilities);
    const minimumMs = minAttemptTimeoutMs(op, capabilities) ?? 0;
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
    const refused = refusals.find((r) => r.operation === op);
    const spec = specs[op];
    if (refused !== undefined || spec === undefined) {
      const variable = retry[op] === undefined ? 'RETRY_*' : `RETRY_${op.toUpperCase()}_*`;
      issues.push({ variable, message: refused?.message ?? '' });
      continue;
    }
    if ((writeOperations as readonly string[]).includes(op)) {
      try {
        assertResendWindowWithinKeyTtl(spec, capabilities, resubmitWindowMs);
      } catch (err) {
        issues.push({
          variable: `PROVIDER_KEY_TTL_S`,
          message: `${op}: ${err instanceof Error ? err.message : String(err)} (see RETRY_${op.toUpperCase()}_BUDGET_MS, RECONCILE_SCHEDULE_MS)`,
        });
      }
    }
  }
}
