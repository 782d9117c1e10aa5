/** Per-provider activity limits: `PROVIDER_<NAME>_MAX_RPS`, `PROVIDER_<NAME>_MAX_CONCURRENCY`. */
import { z } from 'zod';
import { type ConfigIssue, type RawEnv, issuesOf } from './issues';
import { wholeNumber } from './values';

/** `PROVIDER_<NAME>_MAX_RPS` / `PROVIDER_<NAME>_MAX_CONCURRENCY`: per-provider activity limits. */
export const providerLimitVariable = /^PROVIDER_([A-Z0-9_]+)_MAX_(RPS|CONCURRENCY)$/;

/** One provider's activity limits: fleet-wide rate (enforced by the Temporal server) and per-worker concurrency. */
export interface ProviderLimits {
  /** `maxTaskQueueActivitiesPerSecond` of the provider's activity task queue: for all workers together. */
  readonly maxRps?: number;
  /** `maxConcurrentActivityTaskExecutions` of each worker's activity worker for that provider. */
  readonly maxConcurrency?: number;
}

/** `PROVIDER_<NAME>_MAX_RPS` / `PROVIDER_<NAME>_MAX_CONCURRENCY`, by provider name in lower case. */
export function readProviderLimits(raw: RawEnv, issues: ConfigIssue[]): Record<string, ProviderLimits> {
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
  return providerLimits;
}
