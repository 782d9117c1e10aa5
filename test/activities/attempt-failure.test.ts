import { ApplicationFailure } from '@temporalio/common';
import { toActivityFailure, type ClassifyContext } from '../../src/activities/attempt/failure';
import { ErrorType } from '../../src/domain/errors';
import { retrySpecFor } from '../../src/domain/retry';
import {
  NotSentError,
  OutcomeUnknownError,
  ProviderRejectedError,
  ProviderUnavailableError,
} from '../../src/providers/errors';

const spec = retrySpecFor('create', { idempotencyKeys: true, keyTtlSeconds: 86_400 }); // 120 s budget, 15 s attempts
const ctx = (patch: Partial<ClassifyContext> = {}): ClassifyContext => ({
  operation: 'create',
  safety: 'idempotent-write',
  provider: 'simulator',
  attempt: 1,
  spec,
  elapsedMs: 1_000,
  random: () => 0.5,
  ...patch,
});

describe('toActivityFailure', () => {
  it('ProviderRejected: non-retryable, cause and details kept', () => {
    const err = new ProviderRejectedError({ operation: 'create', status: 400, code: 'bad', reason: 'status' });
    const f = toActivityFailure(err, ctx());
    expect(f).toBeInstanceOf(ApplicationFailure);
    expect(f).toMatchObject({ type: ErrorType.ProviderRejected, nonRetryable: true });
    expect(f.cause).toBe(err);
    expect(f.details?.[0]).toMatchObject({
      type: ErrorType.ProviderRejected,
      status: 400,
      provider: 'simulator',
      attempt: 1,
    });
  });

  it('OutcomeUnknown: retried with full jitter where the provider honours keys, never where it does not', () => {
    const err = new OutcomeUnknownError({ operation: 'create', reason: 'reset_after_send' });
    expect(toActivityFailure(err, ctx())).toMatchObject({
      type: ErrorType.OutcomeUnknown,
      nonRetryable: false,
      nextRetryDelay: 250, // 0.5 × 500 ms
    });
    const once = toActivityFailure(err, ctx({ safety: 'non-idempotent-write' }));
    expect(once).toMatchObject({ type: ErrorType.OutcomeUnknown, nonRetryable: true });
    expect(once.nextRetryDelay).toBeUndefined();
    // A read is always safe to repeat.
    expect(toActivityFailure(err, ctx({ operation: 'lookup', safety: 'read' })).nonRetryable).toBe(false);
  });

  it('ProviderUnavailable: Retry-After becomes nextRetryDelay', () => {
    const err = new ProviderUnavailableError({
      operation: 'create',
      status: 429,
      retryAfterMs: 7_000,
      reason: 'status',
    });
    expect(toActivityFailure(err, ctx({ attempt: 3 }))).toMatchObject({ nonRetryable: false, nextRetryDelay: 7_000 });
  });

  it('a near-zero jitter draw still overrides the policy interval', () => {
    const err = new NotSentError({ operation: 'create', reason: 'connect_refused' });
    expect(toActivityFailure(err, ctx({ random: () => 0 })).nextRetryDelay).toBe(1);
  });

  it('BudgetExhausted when the next attempt cannot fit, with the last failure as cause', () => {
    const err = new ProviderUnavailableError({
      operation: 'create',
      status: 503,
      retryAfterMs: 60_000,
      reason: 'status',
    });
    const f = toActivityFailure(err, ctx({ attempt: 4, elapsedMs: 80_000 }));
    expect(f).toMatchObject({ type: ErrorType.BudgetExhausted, nonRetryable: true });
    expect(f.details?.[0]).toMatchObject({
      reason: 'retry-after',
      lastFailureType: ErrorType.ProviderUnavailable,
      attempt: 4,
    });
    expect(f.cause).toBeInstanceOf(ApplicationFailure);
    expect((f.cause as ApplicationFailure).type).toBe(ErrorType.ProviderUnavailable);
    expect(f.cause?.cause).toBe(err);
  });

  it('an unclassified error is an unknown outcome, not a failure', () => {
    const f = toActivityFailure(new TypeError('boom'), ctx({ safety: 'non-idempotent-write' }));
    expect(f).toMatchObject({ type: ErrorType.OutcomeUnknown, nonRetryable: true });
    expect(f.details?.[0]).toMatchObject({ reason: 'unexpected_error' });
  });

  it('passes an ApplicationFailure through untouched', () => {
    const own = ApplicationFailure.create({ type: ErrorType.ValidationError, nonRetryable: true, message: 'x' });
    expect(toActivityFailure(own, ctx())).toBe(own);
  });
});
