import { FailureCounter, shouldTrip } from '../../src/breaker/counting';
import { InMemoryCircuitBreaker, breakerReport, coolDownOf } from '../../src/breaker';
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
    expect(b.acquire('a')).toEqual({ allowed: false, retryAfterMs: 10_000, reason: 'open' });
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

  it('a read success does not reset the count of write failures', () => {
    const b = breaker();
    b.record('a', ErrorType.NotSent);
    b.record('a', ErrorType.NotSent);
    b.record('a', 'success', { kind: 'read' });
    b.record('a', ErrorType.NotSent, { kind: 'read' });
    expect(b.state('a').kind).toBe('open');
  });

  it('half-opens after the open period: one probe, whose outcome closes or re-opens it', () => {
    const b = breaker();
    for (let i = 0; i < 3; i++) b.record('a', ErrorType.NotSent);
    now += 4_000;
    expect(b.acquire('a')).toEqual({ allowed: false, retryAfterMs: 6_000, reason: 'open' });
    now += 6_000;
    const probe = b.acquire('a');
    expect(probe).toEqual({ allowed: true, probe: expect.any(String) });
    expect(b.acquire('a')).toEqual({ allowed: false, retryAfterMs: 10_000, reason: 'probe_in_flight' });
    b.record('a', ErrorType.OutcomeUnknown, breakerReport('idempotent-write', probe));
    expect(b.state('a')).toEqual({ kind: 'open', until: now + 10_000 });
    now += 10_000;
    const second = b.acquire('a');
    b.record('a', 'success', breakerReport('idempotent-write', second));
    expect(b.acquire('a')).toEqual({ allowed: true });
    expect(b.state('a')).toEqual({ kind: 'closed', failures: 0 });
  });

  it('in half-open, only the probe decides: a read success or a late write does not close it', () => {
    const b = breaker();
    for (let i = 0; i < 3; i++) b.record('a', ErrorType.NotSent);
    now += 10_000;
    const probe = b.acquire('a');
    b.record('a', 'success', { kind: 'read' });
    b.record('a', 'success', { kind: 'write' }); // a write that started before the breaker opened
    b.record('a', ErrorType.NotSent, { kind: 'write' });
    expect(b.state('a')).toEqual({ kind: 'half_open', probeUntil: now + 10_000 });
    b.record('a', ErrorType.ProviderRejected, breakerReport('non-idempotent-write', probe)); // a 4xx: it is alive
    expect(b.state('a')).toEqual({ kind: 'closed', failures: 0 });
  });

  it('a probe that never reports back does not keep the breaker shut', () => {
    const b = breaker();
    for (let i = 0; i < 3; i++) b.record('a', ErrorType.NotSent);
    now += 10_000;
    const lost = b.acquire('a');
    now += 10_000;
    const next = b.acquire('a');
    expect(next).toEqual({ allowed: true, probe: expect.any(String) });
    b.record('a', 'success', breakerReport('idempotent-write', lost)); // the lost probe's token is stale
    expect(b.state('a').kind).toBe('half_open');
    b.record('a', 'success', breakerReport('idempotent-write', next));
    expect(b.state('a').kind).toBe('closed');
  });

  it('a cool-down (429/503 Retry-After) refuses writes until it ends, without opening the breaker', () => {
    const b = breaker();
    b.record('a', ErrorType.ProviderUnavailable, { coolDownMs: 3_000 });
    expect(b.acquire('a')).toEqual({ allowed: false, retryAfterMs: 3_000, reason: 'cool_down' });
    now += 2_999;
    expect(b.acquire('a')).toEqual({ allowed: false, retryAfterMs: 1, reason: 'cool_down' });
    now += 1;
    expect(b.acquire('a')).toEqual({ allowed: true });
    expect(b.state('a')).toEqual({ kind: 'closed', failures: 1 });
  });

  it('a refusal carries jitter on top of the wait', () => {
    const b = new InMemoryCircuitBreaker({
      failureThreshold: 1,
      cooldownMs: 10_000,
      jitterMs: 1_000,
      now: () => now,
      random: () => 0.5,
    });
    b.record('a', ErrorType.NotSent);
    expect(b.acquire('a')).toEqual({ allowed: false, retryAfterMs: 10_500, reason: 'open' });
  });
});

describe('counting strategy', () => {
  it('trips on the failure rate over a sliding window, not on calls that slid out of it', () => {
    const policy = { consecutiveFailures: 100, window: { durationMs: 10_000, failureRate: 0.5, minimumCalls: 4 } };
    const c = new FailureCounter(policy);
    let t = 0;
    expect(c.record(false, t)).toBe(false);
    expect(c.record(true, (t += 100))).toBe(false);
    expect(c.record(false, (t += 100))).toBe(false); // 2 of 3: under the minimum
    expect(c.record(true, (t += 100))).toBe(false); // 2 of 4: a healthy outcome never trips
    // Ten seconds on, the first calls have slid out: 1 failure of 1 call is under the minimum again.
    expect(c.record(false, (t += 10_000))).toBe(false);
    expect(c.record(false, (t += 100))).toBe(false);
    expect(c.record(true, (t += 100))).toBe(false);
    expect(c.record(false, (t += 100))).toBe(true); // 3 of 4
  });

  it('the rule itself', () => {
    const p = { consecutiveFailures: 3, window: { durationMs: 1, failureRate: 0.5, minimumCalls: 10 } };
    expect(shouldTrip(p, 3, { calls: 0, failures: 0 })).toBe(true);
    expect(shouldTrip(p, 2, { calls: 10, failures: 5 })).toBe(true);
    expect(shouldTrip(p, 2, { calls: 9, failures: 9 })).toBe(false);
    expect(shouldTrip({ consecutiveFailures: 3 }, 2, { calls: 100, failures: 100 })).toBe(false);
  });
});

describe('what a record reports', () => {
  it('a cool-down only for a 429 or 503 that said Retry-After', () => {
    const u = { type: ErrorType.ProviderUnavailable, operation: 'create', reason: 'x' } as const;
    expect(coolDownOf({ ...u, status: 429, retryAfterMs: 3_000 })).toBe(3_000);
    expect(coolDownOf({ ...u, status: 503, retryAfterMs: 1_000 })).toBe(1_000);
    expect(coolDownOf({ ...u, status: 503 })).toBeUndefined();
    expect(coolDownOf({ ...u, status: 409, retryAfterMs: 1_000 })).toBeUndefined();
    expect(coolDownOf({ ...u, type: ErrorType.OutcomeUnknown, status: 502, retryAfterMs: 1_000 })).toBeUndefined();
  });

  it('reads are reads, the probe token travels with the write', () => {
    expect(breakerReport('read', { allowed: true })).toEqual({ kind: 'read' });
    expect(breakerReport('idempotent-write', { allowed: true, probe: 't' })).toEqual({ kind: 'write', probe: 't' });
  });
});
