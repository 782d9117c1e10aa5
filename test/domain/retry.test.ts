import { ApplicationFailure } from '@temporalio/common';
import fc from 'fast-check';
import {
  ErrorType,
  RetrySpec,
  assertResendWindowWithinKeyTtl,
  callsPerAttempt,
  carriedAttemptRecord,
  computeRetryDelayMs,
  defaultRetrySpecs,
  minAttemptTimeoutMs,
  operationSafety,
  retrySpecFor,
  toActivityOptions,
  type RetryCapabilities,
} from '../../src/domain';

const withKeys: RetryCapabilities = { idempotencyKeys: true, keyTtlSeconds: 86_400 };
const withoutKeys: RetryCapabilities = { idempotencyKeys: false, keyTtlSeconds: null };

const spec: RetrySpec = {
  initialIntervalMs: 1_000,
  backoffCoefficient: 2,
  maximumIntervalMs: 20_000,
  jitter: 'full',
  budgetMs: 120_000,
  attemptTimeoutMs: 15_000,
};

const arbSpec: fc.Arbitrary<RetrySpec> = fc
  .record({
    initialIntervalMs: fc.integer({ min: 1, max: 60_000 }),
    backoffCoefficient: fc.double({ min: 1, max: 10, noNaN: true }),
    extraMaxMs: fc.integer({ min: 0, max: 600_000 }),
    jitter: fc.constantFrom('full' as const, 'none' as const),
    attemptTimeoutMs: fc.integer({ min: 1, max: 120_000 }),
    extraBudgetMs: fc.integer({ min: 0, max: 3_600_000 }),
    maximumAttempts: fc.option(fc.integer({ min: 1, max: 50 }), { nil: undefined }),
  })
  .map(({ extraMaxMs, extraBudgetMs, maximumAttempts, ...s }) => ({
    ...s,
    maximumIntervalMs: s.initialIntervalMs + extraMaxMs,
    budgetMs: s.attemptTimeoutMs + extraBudgetMs,
    ...(maximumAttempts === undefined ? {} : { maximumAttempts }),
  }));

const arbInput = fc.record({
  spec: arbSpec,
  attempt: fc.integer({ min: 1, max: 200 }),
  r: fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }),
  retryAfterMs: fc.option(fc.integer({ min: 0, max: 7_200_000 }), { nil: undefined }),
  elapsedMs: fc.integer({ min: 0, max: 8_000_000 }),
});

describe('computeRetryDelayMs (properties)', () => {
  it('is never negative and never more than the remaining budget minus one attempt', () => {
    fc.assert(
      fc.property(arbInput, ({ spec: s, attempt, r, retryAfterMs, elapsedMs }) => {
        const d = computeRetryDelayMs({ spec: s, attempt, random: () => r, elapsedMs, retryAfterMs });
        if (d.exhausted) return;
        expect(d.delayMs).toBeGreaterThanOrEqual(0);
        expect(Number.isInteger(d.delayMs)).toBe(true);
        expect(d.delayMs).toBeLessThanOrEqual(s.budgetMs - elapsedMs);
        // The next attempt always has its whole timeout inside the budget.
        expect(elapsedMs + d.delayMs + s.attemptTimeoutMs).toBeLessThanOrEqual(s.budgetMs);
      }),
      { numRuns: 2_000 },
    );
  });

  it('answers exactly the Retry-After when it fits, and exhausted when it does not', () => {
    fc.assert(
      fc.property(arbInput, ({ spec: s, attempt, r, retryAfterMs, elapsedMs }) => {
        fc.pre(retryAfterMs !== undefined);
        fc.pre(s.maximumAttempts === undefined || attempt < s.maximumAttempts);
        const d = computeRetryDelayMs({ spec: s, attempt, random: () => r, elapsedMs, retryAfterMs });
        const fits = elapsedMs + (retryAfterMs ?? 0) + s.attemptTimeoutMs <= s.budgetMs;
        expect(d).toEqual(fits ? { delayMs: retryAfterMs } : { exhausted: true, reason: expect.any(String) });
      }),
      { numRuns: 2_000 },
    );
  });

  it('stays within the exponential ceiling without Retry-After', () => {
    fc.assert(
      fc.property(arbInput, ({ spec: s, attempt, r, elapsedMs }) => {
        const d = computeRetryDelayMs({ spec: s, attempt, random: () => r, elapsedMs });
        if (d.exhausted) return;
        const ceiling = Math.min(s.maximumIntervalMs, s.initialIntervalMs * s.backoffCoefficient ** (attempt - 1));
        expect(d.delayMs).toBeLessThanOrEqual(Math.ceil(ceiling));
      }),
      { numRuns: 2_000 },
    );
  });

  it('stops at maximumAttempts', () => {
    fc.assert(
      fc.property(arbInput, ({ spec: s, attempt, r, elapsedMs }) => {
        fc.pre(s.maximumAttempts !== undefined && attempt >= s.maximumAttempts);
        expect(computeRetryDelayMs({ spec: s, attempt, random: () => r, elapsedMs })).toEqual({
          exhausted: true,
          reason: 'attempts',
        });
      }),
    );
  });
});

describe('computeRetryDelayMs (examples)', () => {
  const at = (attempt: number, r: number, extra: { retryAfterMs?: number; elapsedMs?: number } = {}) =>
    computeRetryDelayMs({ spec, attempt, random: () => r, elapsedMs: extra.elapsedMs ?? 0, ...extra });

  it('full jitter: random() × min(max, initial × 2^(attempt-1))', () => {
    expect(at(1, 0.5)).toEqual({ delayMs: 500 });
    expect(at(3, 0.5)).toEqual({ delayMs: 2_000 });
    expect(at(10, 0.999)).toEqual({ delayMs: 19_980 }); // capped at maximumInterval
    expect(at(2, 0)).toEqual({ delayMs: 0 });
  });

  it('no jitter: the ceiling itself', () => {
    expect(
      computeRetryDelayMs({ spec: { ...spec, jitter: 'none' }, attempt: 4, random: () => 0, elapsedMs: 0 }),
    ).toEqual({
      delayMs: 8_000,
    });
  });

  it('Retry-After wins over the backoff, even above maximumInterval', () => {
    expect(at(1, 0.5, { retryAfterMs: 30_000 })).toEqual({ delayMs: 30_000 });
    expect(at(1, 0.5, { retryAfterMs: 0 })).toEqual({ delayMs: 0 });
  });

  it('shortens the backoff to what the budget leaves, and gives up when no attempt fits', () => {
    // 120 s budget, 100 s gone, 15 s attempt: 5 s left to wait.
    expect(at(10, 0.999, { elapsedMs: 100_000 })).toEqual({ delayMs: 5_000 });
    expect(at(1, 0.5, { elapsedMs: 105_001 })).toEqual({ exhausted: true, reason: 'budget' });
    expect(at(1, 0.5, { elapsedMs: 100_000, retryAfterMs: 6_000 })).toEqual({ exhausted: true, reason: 'retry-after' });
  });
});

describe('retrySpecFor and toActivityOptions', () => {
  it('derives the safety from the operation and the provider', () => {
    expect(operationSafety('create', withKeys)).toBe('idempotent-write');
    expect(operationSafety('create', withoutKeys)).toBe('non-idempotent-write');
    expect(operationSafety('refund', withoutKeys)).toBe('non-idempotent-write');
    expect(operationSafety('lookup', withoutKeys)).toBe('read');
    expect(operationSafety('list', withKeys)).toBe('read');
    expect(retrySpecFor('void', withoutKeys)).toMatchObject({ operation: 'void', safety: 'non-idempotent-write' });
  });

  it('applies overrides and validates the result', () => {
    expect(retrySpecFor('create', withKeys, { budgetMs: 30_000 }).budgetMs).toBe(30_000);
    const err = (() => {
      try {
        retrySpecFor('create', withKeys, { attemptTimeoutMs: 60_000, budgetMs: 30_000 });
      } catch (e) {
        return e;
      }
    })();
    expect(err).toBeInstanceOf(ApplicationFailure);
    expect((err as ApplicationFailure).type).toBe(ErrorType.ValidationError);
    expect((err as ApplicationFailure).nonRetryable).toBe(true);
    expect((err as Error).message).toMatch(/attemptTimeoutMs/);
  });

  it('every preset is a valid spec', () => {
    for (const preset of Object.values(defaultRetrySpecs)) expect(RetrySpec.safeParse(preset).success).toBe(true);
  });

  it('maps a spec onto Temporal activity options', () => {
    const create = retrySpecFor('create', withKeys, { maximumAttempts: 7 });
    expect(toActivityOptions(create, create.safety)).toEqual({
      startToCloseTimeout: 15_000,
      scheduleToCloseTimeout: 120_000,
      heartbeatTimeout: 10_000,
      retry: {
        initialInterval: 500,
        backoffCoefficient: 2,
        maximumInterval: 20_000,
        maximumAttempts: 7,
        nonRetryableErrorTypes: [
          ErrorType.ProviderRejected,
          ErrorType.BudgetExhausted,
          ErrorType.IdempotencyKeyReused,
          ErrorType.ValidationError,
          ErrorType.InvalidTransition,
        ],
      },
    });
  });

  it('makes OutcomeUnknown non-retryable for a write without keys only', () => {
    const types = (caps: RetryCapabilities, op: 'create' | 'lookup') => {
      const s = retrySpecFor(op, caps);
      return toActivityOptions(s, s.safety).retry?.nonRetryableErrorTypes;
    };
    expect(types(withoutKeys, 'create')).toContain(ErrorType.OutcomeUnknown);
    expect(types(withKeys, 'create')).not.toContain(ErrorType.OutcomeUnknown);
    expect(types(withoutKeys, 'lookup')).not.toContain(ErrorType.OutcomeUnknown);
  });
});

describe('the attempt timeout covers every call one attempt can make', () => {
  const limits = { callTimeoutMs: 10_000, referencePages: 5 };
  const keys: RetryCapabilities = { ...withKeys, lookupByKey: true, callLimits: limits };
  const noKeys: RetryCapabilities = { ...withoutKeys, lookupByKey: false, callLimits: limits };

  it('counts the calls: look-up pages before a resend, the write, the read after a refund', () => {
    const calls = (caps: RetryCapabilities) =>
      Object.fromEntries(
        (['create', 'capture', 'void', 'refund', 'lookup', 'list'] as const).map((op) => [
          op,
          callsPerAttempt(op, caps),
        ]),
      );
    expect(calls(keys)).toEqual({ create: 1, capture: 1, void: 1, refund: 2, lookup: 5, list: 1 });
    expect(calls(noKeys)).toEqual({ create: 6, capture: 2, void: 2, refund: 3, lookup: 5, list: 1 });
    // A provider without keys that can be asked by key looks up once before a resend.
    expect(callsPerAttempt('create', { ...noKeys, lookupByKey: true })).toBe(2);
  });

  it('raises a configured attempt timeout to what the calls need, never lowers it', () => {
    expect(minAttemptTimeoutMs('create', noKeys)).toBe(61_000);
    expect(retrySpecFor('create', noKeys, { attemptTimeoutMs: 5_000 }).attemptTimeoutMs).toBe(61_000);
    expect(retrySpecFor('refund', keys).attemptTimeoutMs).toBe(21_000);
    expect(retrySpecFor('create', keys).attemptTimeoutMs).toBe(15_000);
    expect(retrySpecFor('create', keys, { attemptTimeoutMs: 40_000 }).attemptTimeoutMs).toBe(40_000);
  });

  it('leaves the timeout as configured when the provider reported no limits (histories recorded before)', () => {
    expect(minAttemptTimeoutMs('create', withoutKeys)).toBeUndefined();
    expect(retrySpecFor('create', withoutKeys, { attemptTimeoutMs: 5_000 }).attemptTimeoutMs).toBe(5_000);
  });

  it('a budget too small for one whole attempt is a ValidationError, not a silent cut-off', () => {
    expect(() => retrySpecFor('create', noKeys, { budgetMs: 30_000 })).toThrow(/attemptTimeoutMs must not exceed/);
  });

  it('the heartbeat timeout is never longer than the attempt', () => {
    const s = retrySpecFor('list', keys, { heartbeatTimeoutMs: 60_000 });
    expect(toActivityOptions(s, s.safety).heartbeatTimeout).toBe(30_000);
  });
});

describe('carriedAttemptRecord', () => {
  const closed = (record: object, by: number) => ({ ...record, closedBy: by });

  it('a write still in flight when its attempt ended counts as sent with an unknown outcome', () => {
    expect(carriedAttemptRecord({ everSent: false, everUnknown: false, inFlight: true, sends: 0 }, 2)).toEqual({
      everSent: true,
      everUnknown: true,
      inFlight: false,
      sends: 1,
    });
    expect(
      carriedAttemptRecord(closed({ everSent: true, everUnknown: false, inFlight: false, sends: 2 }, 2), 3),
    ).toEqual({ everSent: true, everUnknown: false, inFlight: false, sends: 2 });
  });

  it('a record closed by the attempt right before is what that attempt did, nothing more', () => {
    expect(
      carriedAttemptRecord(closed({ everSent: false, everUnknown: false, inFlight: false, sends: 0 }, 4), 5),
    ).toEqual({ everSent: false, everUnknown: false, inFlight: false, sends: 0 });
  });

  it('an attempt that ended without closing the record (its worker died before a heartbeat said it sent) may have sent', () => {
    // Attempt 2 refused before sending and closed the record; attempt 3 sent, then its worker was killed before the
    // throttled heartbeat of the send reached the server: attempt 4 finds attempt 2's record.
    const attempt2 = closed({ everSent: false, everUnknown: false, inFlight: false, sends: 0 }, 2);
    expect(carriedAttemptRecord(attempt2, 4)).toEqual({ everSent: true, everUnknown: true, inFlight: false, sends: 1 });
    // A heartbeat between sends (not closed) says as little about the end of its attempt.
    expect(carriedAttemptRecord({ everSent: true, everUnknown: false, inFlight: false, sends: 1 }, 2)).toEqual({
      everSent: true,
      everUnknown: true,
      inFlight: false,
      sends: 2,
    });
    // In flight and not closed: one possible send, not two.
    expect(carriedAttemptRecord({ everSent: false, everUnknown: false, inFlight: true, sends: 0 }, 3)).toMatchObject({
      sends: 1,
    });
  });

  it('a later attempt with no record at all follows attempts that never said what they did: possibly sent', () => {
    for (const details of [undefined, null, 'x', { everSent: 'yes' }]) {
      expect(carriedAttemptRecord(details, 2)).toEqual({
        everSent: true,
        everUnknown: true,
        inFlight: false,
        sends: 1,
      });
    }
  });

  it('a record written before sends were counted: at least one send when it says sent', () => {
    expect(carriedAttemptRecord(closed({ everSent: true, everUnknown: false, inFlight: false }, 1), 2)).toMatchObject({
      sends: 1,
    });
    expect(carriedAttemptRecord({ everSent: true, everUnknown: true, inFlight: true }, 2)).toMatchObject({ sends: 2 });
    expect(carriedAttemptRecord(closed({ everSent: false, everUnknown: false, inFlight: false }, 1), 2)).toMatchObject({
      sends: 0,
    });
  });

  it('nothing recorded on a first attempt, or unreadable details there: nothing done', () => {
    for (const details of [undefined, null, 'x', { everSent: 'yes' }]) {
      expect(carriedAttemptRecord(details, 1)).toEqual({
        everSent: false,
        everUnknown: false,
        inFlight: false,
        sends: 0,
      });
    }
  });
});

describe('assertResendWindowWithinKeyTtl', () => {
  it('rejects a budget plus resubmit window that reaches the key lifetime, and says why', () => {
    const create = retrySpecFor('create', { idempotencyKeys: true, keyTtlSeconds: 3_600 });
    expect(() =>
      assertResendWindowWithinKeyTtl(create, { idempotencyKeys: true, keyTtlSeconds: 3_600 }, 3_480_000),
    ).toThrow(/a resend after the provider forgot the key is a second charge/);
    // Exactly at the lifetime is already too late.
    expect(() =>
      assertResendWindowWithinKeyTtl(create, { idempotencyKeys: true, keyTtlSeconds: 3_600 }, 3_600_000 - 120_000),
    ).toThrow(ApplicationFailure);
    expect(() =>
      assertResendWindowWithinKeyTtl(create, { idempotencyKeys: true, keyTtlSeconds: 3_600 }, 3_600_000 - 120_001),
    ).not.toThrow();
  });

  it('has nothing to check without keys, without expiry, or for a read', () => {
    expect(() => assertResendWindowWithinKeyTtl(spec, withoutKeys, 10 ** 12)).not.toThrow();
    expect(() =>
      assertResendWindowWithinKeyTtl(spec, { idempotencyKeys: true, keyTtlSeconds: null }, 10 ** 12),
    ).not.toThrow();
    const lookup = retrySpecFor('lookup', { idempotencyKeys: true, keyTtlSeconds: 1 });
    expect(() =>
      assertResendWindowWithinKeyTtl(lookup, { idempotencyKeys: true, keyTtlSeconds: 1 }, 10 ** 9),
    ).not.toThrow();
  });
});
