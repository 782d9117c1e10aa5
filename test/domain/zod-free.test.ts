/**
 * Workflow bundles carry no zod: the worker evaluates every module of the bundle again for each workflow it creates,
 * and zod with the schemas built on it cost about a third of a payment's Node CPU (bench/README.md). The workflow side
 * checks with zod-free code what the zod schemas check at the boundaries; these properties hold the two to the same
 * verdicts and results.
 */
import fc from 'fast-check';
import { ApplicationFailure } from '@temporalio/common';
import { RetrySpec, retrySpecFor, retrySpecIssues, retrySpecKeys } from '../../src/domain/retry';
import { ResolveReviewItemRequest, parseReviewItemResolution } from '../../src/domain/review-items';
import { workflowBundle } from '../helpers/workflow-bundle';

describe('the workflow bundle', () => {
  it('has no zod module (the workflow side imports only the zod-free domain modules)', async () => {
    // The bundle the run's workers load (built once per run from these sources, with the failure converter).
    const { code } = await workflowBundle();
    const modules = [...code.matchAll(/^\/\*\*\*\/ "([^"]+)"$/gm)].map((m) => m[1] as string);
    expect(modules.length).toBeGreaterThan(20); // the markers are there: the check below is not vacuous
    expect(modules.filter((m) => m.includes('node_modules/zod/'))).toEqual([]);
    expect(modules).toContain('./src/workflows/charge.ts');
  }, 120_000);
});

/** Numbers that hit every edge of the rules: non-integers, zero, negatives, unsafe, not finite, not numbers. */
const anyNumberish = fc.oneof(
  fc.integer({ min: -5, max: 200_000 }),
  fc.constantFrom(0, 1, 100, 101, 0.5, 1.5, 99.9, -1, Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER + 2),
  fc.constantFrom(Number.NaN, Number.POSITIVE_INFINITY, -0),
  fc.double({ noNaN: false }),
  fc.constantFrom('100', null, true),
);
const arbSpecLike = fc.record(
  {
    initialIntervalMs: anyNumberish,
    backoffCoefficient: anyNumberish,
    maximumIntervalMs: anyNumberish,
    jitter: fc.constantFrom('full', 'none', 'FULL', '', 1),
    budgetMs: anyNumberish,
    attemptTimeoutMs: anyNumberish,
    maximumAttempts: fc.option(anyNumberish, { nil: undefined }),
    heartbeatTimeoutMs: fc.option(anyNumberish, { nil: undefined }),
    extra: fc.string(),
  },
  { requiredKeys: ['jitter'] },
);
/** Mostly valid specs near the edges of each rule, so every rule decides often. */
const edgeMs = fc.oneof(fc.integer({ min: 1, max: 60_000 }), fc.constantFrom(0, 1, 1.5, Number.MAX_SAFE_INTEGER));
const arbValidish = fc
  .record({
    initialIntervalMs: edgeMs,
    backoffCoefficient: fc.oneof(
      fc.integer({ min: 1, max: 100 }),
      fc.constantFrom(0.99, 1, 2.5, 100, 100.000001, 100.5, 101),
      fc.double({ min: 0.5, max: 120, noNaN: true }),
    ),
    maximumIntervalMs: edgeMs,
    jitter: fc.constantFrom('full', 'none'),
    budgetMs: fc.integer({ min: 1, max: 600_000 }),
    attemptTimeoutDelta: fc.integer({ min: -3, max: 3 }),
    maximumIntervalDelta: fc.option(fc.integer({ min: -2, max: 2 }), { nil: undefined }),
    maximumAttempts: fc.option(fc.constantFrom(0, 1, 2, 7, 1.5, -1), { nil: undefined }),
    heartbeatTimeoutMs: fc.option(edgeMs, { nil: undefined }),
  })
  // The attempt timeout right around the budget, the maximum interval around the initial one: the cross-field edges.
  .map(({ attemptTimeoutDelta, maximumIntervalDelta, ...s }) => ({
    ...s,
    attemptTimeoutMs: Math.max(1, s.budgetMs + attemptTimeoutDelta),
    ...(maximumIntervalDelta === undefined ? {} : { maximumIntervalMs: s.initialIntervalMs + maximumIntervalDelta }),
  }));

describe('retrySpecIssues (workflow side) and the RetrySpec schema', () => {
  it('agree on every value, and a valid spec keeps the same fields', () => {
    fc.assert(
      fc.property(fc.oneof(arbSpecLike, arbValidish), (value) => {
        const zod = RetrySpec.safeParse(value);
        const issues = retrySpecIssues(value);
        expect(issues.length === 0).toBe(zod.success);
        if (zod.success) {
          const kept = Object.fromEntries(
            retrySpecKeys.flatMap((k) =>
              value[k as keyof typeof value] === undefined ? [] : [[k, value[k as keyof typeof value]]],
            ),
          );
          expect(kept).toEqual(zod.data);
        }
      }),
      { numRuns: 3_000 },
    );
  });

  it('retrySpecFor answers what parsing with the schema answers, and throws a non-retryable ValidationError otherwise', () => {
    const caps = { idempotencyKeys: true, keyTtlSeconds: 86_400 };
    fc.assert(
      fc.property(arbValidish, (overrides) => {
        const zod = RetrySpec.safeParse(overrides);
        if (zod.success) {
          expect(retrySpecFor('create', caps, overrides)).toEqual({
            ...zod.data,
            operation: 'create',
            safety: 'idempotent-write',
          });
        } else {
          let thrown: unknown;
          try {
            retrySpecFor('create', caps, overrides);
          } catch (err) {
            thrown = err;
          }
          expect(thrown).toBeInstanceOf(ApplicationFailure);
          expect(thrown).toMatchObject({ type: 'ValidationError', nonRetryable: true });
        }
      }),
      { numRuns: 2_000 },
    );
  });
});

describe('parseReviewItemResolution (workflow side) and the ResolveReviewItemRequest schema', () => {
  const arbText = fc.oneof(
    fc.string({ maxLength: 20 }),
    fc.constantFrom(
      '',
      ' ',
      '  \t\n ',
      ' ok ',
      'x'.repeat(1000),
      ` ${'x'.repeat(1000)} `,
      'x'.repeat(1001),
      'y'.repeat(128),
      'y'.repeat(129),
    ),
    fc.constantFrom(7, null, undefined, {}),
  );
  const arbResolution = fc.oneof(
    fc.record(
      {
        action: fc.constantFrom('refunded_at_provider', 'voided_at_provider', 'attributed', 'no_action', 'refund', ''),
        note: arbText,
        operator: arbText,
        extra: fc.string(),
      },
      { requiredKeys: [] },
    ),
    fc.constantFrom(null, 'no_action', [], 42),
  );

  it('agree on every value, and the same resolution comes out (note trimmed)', () => {
    fc.assert(
      fc.property(arbResolution, (value) => {
        const zod = ResolveReviewItemRequest.safeParse(value);
        const ours = parseReviewItemResolution(value);
        expect(ours.ok).toBe(zod.success);
        if (ours.ok && zod.success) expect(ours.value).toEqual(zod.data);
      }),
      { numRuns: 3_000 },
    );
  });

  it('names the field in each issue', () => {
    const answer = parseReviewItemResolution({ action: 'no_action', note: '   ', operator: '' });
    expect(answer).toEqual({
      ok: false,
      issues: [
        { path: 'note', message: 'note must not be empty' },
        { path: 'operator', message: 'operator must be a string of 1 to 128 characters' },
      ],
    });
  });
});
