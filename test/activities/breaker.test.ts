import { InMemoryCircuitBreaker } from '../../src/activities/breaker';
import { ErrorType } from '../../src/domain/errors';

describe('InMemoryCircuitBreaker', () => {
  let now = 0;
  const breaker = () => new InMemoryCircuitBreaker({ failureThreshold: 3, cooldownMs: 10_000, now: () => now });
  beforeEach(() => {
    now = 1_000_000;
  });

  it('opens after N consecutive unhealthy outcomes, per provider', () => {
    const b = breaker();
    b.record('a', ErrorType.NotSent);
    b.record('a', ErrorType.ProviderUnavailable);
    expect(b.acquire('a')).toEqual({ allowed: true });
    b.record('a', ErrorType.OutcomeUnknown);
    expect(b.acquire('a')).toEqual({ allowed: false, retryAfterMs: 10_000 });
    expect(b.acquire('b')).toEqual({ allowed: true });
  });

  it('a success or a rejection (a healthy answer) resets the count', () => {
    const b = breaker();
    b.record('a', ErrorType.NotSent);
    b.record('a', ErrorType.NotSent);
    b.record('a', ErrorType.ProviderRejected);
    b.record('a', ErrorType.NotSent);
    b.record('a', ErrorType.NotSent);
    expect(b.state('a')).toEqual({ kind: 'closed', failures: 2 });
    b.record('a', 'success');
    expect(b.state('a')).toEqual({ kind: 'closed', failures: 0 });
  });

  it('half-opens after the cool-down: one trial, which closes or re-opens it', () => {
    const b = breaker();
    for (let i = 0; i < 3; i++) b.record('a', ErrorType.NotSent);
    now += 4_000;
    expect(b.acquire('a')).toEqual({ allowed: false, retryAfterMs: 6_000 });
    now += 6_000;
    expect(b.acquire('a')).toEqual({ allowed: true });
    expect(b.acquire('a')).toEqual({ allowed: false, retryAfterMs: 10_000 }); // the trial is out
    b.record('a', ErrorType.OutcomeUnknown);
    expect(b.state('a')).toEqual({ kind: 'open', until: now + 10_000 });
    now += 10_000;
    expect(b.acquire('a')).toEqual({ allowed: true });
    b.record('a', 'success');
    expect(b.acquire('a')).toEqual({ allowed: true });
    expect(b.state('a')).toEqual({ kind: 'closed', failures: 0 });
  });

  it('a trial that never reports back does not keep the breaker shut', () => {
    const b = breaker();
    for (let i = 0; i < 3; i++) b.record('a', ErrorType.NotSent);
    now += 10_000;
    expect(b.acquire('a')).toEqual({ allowed: true });
    now += 10_000;
    expect(b.acquire('a')).toEqual({ allowed: true });
  });
});
