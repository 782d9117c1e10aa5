/**
 * Worker slots against the retry presets' budgets under a full queue (src/domain/capacity.ts): the numbers for the
 * production presets, a budget that cannot hold one turn of the slots (refused, with the numbers and the variables to
 * change), and a rate limit the slots cannot absorb (a warning naming how many workers it needs).
 */
import { describeCapacity, providerCapacity } from '../../src/domain/capacity';
import type { RetryCapabilities } from '../../src/domain/retry';

/** The simulator's capabilities as config builds them: keys honoured, 10 s per call, look-ups of up to 5 pages. */
const simulator = (callTimeoutMs = 10_000): RetryCapabilities => ({
  idempotencyKeys: true,
  keyTtlSeconds: 86_400,
  lookupByKey: true,
  callLimits: { callTimeoutMs, referencePages: 5 },
});

it('the production presets fit 50 slots: each operation still starts within its budget behind full turns of them', () => {
  const c = providerCapacity({ provider: 'simulator', capabilities: simulator(), slots: 50 });
  expect(c.findings).toEqual([]);
  // The longest attempt is a look-up walking 5 pages of 10 s each (plus 1 s of overhead).
  expect({ longest: c.longestAttemptMs, op: c.longestOperation }).toEqual({ longest: 51_000, op: 'lookup' });
  const create = c.operations.find((o) => o.operation === 'create');
  // 120 s budget - 15 s attempt = 105 s to wait: two turns of 51 s, so 100 tasks may be queued ahead.
  expect(create).toEqual({
    operation: 'create',
    attemptTimeoutMs: 15_000,
    budgetMs: 120_000,
    startAllowanceMs: 105_000,
    turns: 2,
    queuedWithinBudget: 100,
  });
  console.log(`[capacity] ${describeCapacity(c)}`);
  expect(describeCapacity(c)).toContain('create 100 (budget 120 s)');
});

it('refuses a create budget that cannot wait one turn of the slots, with the numbers and what to change', () => {
  // `npm run demo`'s quick needs_review settings: RETRY_CREATE_BUDGET_MS=16000 PROVIDER_TOTAL_TIMEOUT_MS=5000 (a
  // look-up then takes up to 26 s, the sweep's list keeps its preset's 30 s).
  const c = providerCapacity({
    provider: 'simulator',
    capabilities: simulator(5_000),
    retry: { create: { budgetMs: 16_000, maximumAttempts: 2 } },
    slots: 50,
  });
  expect(c.findings.map((f) => f.severity)).toEqual(['refuse']);
  expect(c.findings[0]?.message).toBe(
    "provider simulator: create's budget (16 s, RETRY_CREATE_BUDGET_MS) leaves 1 s to wait for a slot before its " +
      "15 s attempt, but under a full queue each of this worker's 50 slots (PROVIDER_SIMULATOR_MAX_CONCURRENCY) is " +
      'held for up to 30 s (a list attempt): a create that finds them all busy cannot run one attempt within its ' +
      'budget. Raise RETRY_CREATE_BUDGET_MS to at least 45000 ms, or shorten the longest attempt ' +
      '(PROVIDER_TOTAL_TIMEOUT_MS, RETRY_LIST_ATTEMPT_TIMEOUT_MS).',
  );
  // At the budget it names, it fits.
  const fixed = providerCapacity({
    provider: 'simulator',
    capabilities: simulator(5_000),
    retry: { create: { budgetMs: 45_000 } },
    slots: 50,
  });
  expect(fixed.findings).toEqual([]);
});

it('warns when the rate the server hands out outgrows the slots while the provider is slow', () => {
  const c = providerCapacity({ provider: 'simulator', capabilities: simulator(), slots: 50, maxRps: 20 });
  expect(c.findings).toEqual([
    {
      severity: 'warn',
      message:
        'provider simulator: PROVIDER_SIMULATOR_MAX_RPS=20 lets the server hand out 20 tasks/s; while the provider ' +
        'is slow (attempts of up to 51 s) that is up to 1020 in flight, and this worker has 50 slots: unless 21 ' +
        'workers serve simulator, its queue grows until tasks miss their budgets.',
    },
  ]);
  // A rate the slots hold at the slowest: no warning.
  expect(
    providerCapacity({ provider: 'simulator', capabilities: simulator(), slots: 50, maxRps: 0.9 }).findings,
  ).toEqual([]);
});
