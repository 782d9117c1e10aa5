/**
 * Whether a worker's slots fit the retry presets' promises under a full queue (docs/resilience-checklist.md,
 * "Timeouts and slots"). Every operation of one provider runs on that provider's activity task queue, where this
 * worker has `slots` activity slots. When the provider answers slowly, each slot is held for up to the longest attempt
 * timeout of any operation (a look-up walking its pages, say); a task that finds every slot busy waits up to that long
 * before it starts. The preset promises the whole operation within its budget (schedule-to-close), with every attempt
 * given its full attempt timeout; so the budget minus one attempt is what the operation can spend waiting for a slot
 * (its schedule-to-start allowance), and one full turn of the slots must fit in it. How many turns fit, times the
 * slots, is how many tasks may be queued ahead of it before it misses its budget. A fleet-wide rate limit
 * (`PROVIDER_<NAME>_MAX_RPS`) that hands out more tasks per second than the slots can hold at the slowest is a queue
 * that grows.
 */
import {
  type ProviderOperation,
  type RetryCapabilities,
  type RetryOverrides,
  providerOperations,
  retrySpecFor,
} from './retry-policy';

/** One provider's side of one worker: its capabilities, presets, slots and rate limit. */
export interface CapacityInput {
  readonly provider: string;
  readonly capabilities: RetryCapabilities;
  readonly retry?: RetryOverrides;
  /** This worker's activity slots on the provider's queue (`maxConcurrentActivityTaskExecutions`). */
  readonly slots: number;
  /** Fleet-wide activities per second the server hands out on that queue, when limited. */
  readonly maxRps?: number;
}

/** One operation's numbers under a full queue. */
export interface OperationCapacity {
  readonly operation: ProviderOperation;
  readonly attemptTimeoutMs: number;
  readonly budgetMs: number;
  /** What the budget leaves for waiting for a slot while keeping one full attempt: its schedule-to-start allowance. */
  readonly startAllowanceMs: number;
  /** Full turns of the slots (each up to the longest attempt) that fit in that allowance. */
  readonly turns: number;
  /** Tasks that may be queued ahead of it before it misses its budget: turns x slots. */
  readonly queuedWithinBudget: number;
}

/** A promise that cannot be kept (`refuse`) or a queue that can grow past it (`warn`), with its numbers. */
export interface CapacityFinding {
  readonly severity: 'refuse' | 'warn';
  readonly message: string;
}

/** The verdict on one provider. */
export interface ProviderCapacity {
  readonly provider: string;
  readonly slots: number;
  /** The longest attempt timeout on the queue, and whose it is. */
  readonly longestAttemptMs: number;
  readonly longestOperation: ProviderOperation;
  readonly operations: readonly OperationCapacity[];
  readonly findings: readonly CapacityFinding[];
}

const s = (ms: number): string => `${Number((ms / 1000).toFixed(1))} s`;

/** The numbers and findings for one provider (pure; the worker logs them and refuses on `refuse`). */
export function providerCapacity(input: CapacityInput): ProviderCapacity {
  const { provider, slots } = input;
  const specs = providerOperations.map((operation) => ({
    operation,
    spec: retrySpecFor(operation, input.capabilities, input.retry?.[operation]),
  }));
  const longest = specs.reduce((a, b) => (b.spec.attemptTimeoutMs > a.spec.attemptTimeoutMs ? b : a));
  const longestAttemptMs = longest.spec.attemptTimeoutMs;
  const upper = provider.toUpperCase();
  const operations = specs.map(({ operation, spec }): OperationCapacity => {
    const startAllowanceMs = Math.max(0, spec.budgetMs - spec.attemptTimeoutMs);
    const turns = Math.floor(startAllowanceMs / longestAttemptMs);
    return {
      operation,
      attemptTimeoutMs: spec.attemptTimeoutMs,
      budgetMs: spec.budgetMs,
      startAllowanceMs,
      turns,
      queuedWithinBudget: turns * slots,
    };
  });
  const findings: CapacityFinding[] = operations
    .filter((o) => o.turns < 1)
    .map((o) => {
      const op = o.operation.toUpperCase();
      return {
        severity: 'refuse',
        message:
          `provider ${provider}: ${o.operation}'s budget (${s(o.budgetMs)}, RETRY_${op}_BUDGET_MS) leaves ` +
          `${s(o.startAllowanceMs)} to wait for a slot before its ${s(o.attemptTimeoutMs)} attempt, but under a full ` +
          `queue each of this worker's ${slots} slots (PROVIDER_${upper}_MAX_CONCURRENCY) is held for up to ` +
          `${s(longestAttemptMs)} (a ${longest.operation} attempt): a ${o.operation} that finds them all busy cannot ` +
          `run one attempt within its budget. Raise RETRY_${op}_BUDGET_MS to at least ` +
          `${o.attemptTimeoutMs + longestAttemptMs} ms, or shorten the longest attempt (PROVIDER_TOTAL_TIMEOUT_MS, ` +
          `RETRY_${longest.operation.toUpperCase()}_ATTEMPT_TIMEOUT_MS).`,
      };
    });
  if (input.maxRps !== undefined) {
    // Little's law: at the rate the server hands tasks out, a slow provider keeps rate x attempt of them in flight.
    const inFlight = input.maxRps * (longestAttemptMs / 1000);
    if (inFlight > slots) {
      findings.push({
        severity: 'warn',
        message:
          `provider ${provider}: PROVIDER_${upper}_MAX_RPS=${input.maxRps} lets the server hand out ${input.maxRps} ` +
          `tasks/s; while the provider is slow (attempts of up to ${s(longestAttemptMs)}) that is up to ` +
          `${Math.ceil(inFlight)} in flight, and this worker has ${slots} slots: unless ` +
          `${Math.ceil(inFlight / slots)} workers serve ${provider}, its queue grows until tasks miss their budgets.`,
      });
    }
  }
  return { provider, slots, longestAttemptMs, longestOperation: longest.operation, operations, findings };
}

/** One line of numbers for the worker's log: what a full queue of this provider can hold within each budget. */
export function describeCapacity(c: ProviderCapacity): string {
  const per = c.operations.map((o) => `${o.operation} ${o.queuedWithinBudget} (budget ${s(o.budgetMs)})`).join(', ');
  return (
    `provider ${c.provider}: ${c.slots} slots, each held up to ${s(c.longestAttemptMs)} (${c.longestOperation}) when ` +
    `the provider is slow; tasks that may be queued ahead and still start within the budget: ${per}`
  );
}
