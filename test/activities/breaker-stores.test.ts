/**
 * One table of cases for both breaker stores: the in-process one and the Redis one (a real redis-server on a free
 * port), so the Lua script and the TypeScript state machine and counting strategy cannot drift apart. Injected clock.
 */
import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import {
  type BreakerOptions,
  type InspectableBreaker,
  InMemoryCircuitBreaker,
  breakerReport,
} from '../../src/activities';
import {
  RedisCircuitBreaker,
  closeBreakerRedis,
  connectBreakerRedis,
  redisReady,
} from '../../src/activities/breaker-redis';
import { ErrorType } from '../../src/domain/errors';
import { type RunningRedis, startRedisServer } from '../../scripts/lib/redis-server';

let redisServer: RunningRedis;
const clients: Redis[] = [];

beforeAll(async () => {
  redisServer = await startRedisServer();
});
afterAll(async () => {
  await Promise.all(clients.map(closeBreakerRedis));
  await redisServer?.stop();
});

type Store = (options: BreakerOptions) => Promise<InspectableBreaker>;
const inProcess: Store = async (options) => new InMemoryCircuitBreaker(options);
const redis: Store = async (options) => {
  const client = connectBreakerRedis(redisServer.url);
  clients.push(client);
  if (!(await redisReady(client, 5_000))) throw new Error('redis not ready');
  return new RedisCircuitBreaker(client, { ...options, keyPrefix: `t:${randomUUID()}:` });
};

describe.each([
  ['in-process', inProcess],
  ['redis', redis],
])('%s store', (_name, store) => {
  let now = 0;
  const clock = { now: () => now };
  beforeEach(() => {
    now = 1_700_000_000_000;
  });

  it('consecutive failures open it; a 4xx or a success in between resets the count; a read success does not', async () => {
    const b = await store({ failureThreshold: 3, cooldownMs: 10_000, ...clock });
    await b.record('p', ErrorType.NotSent);
    await b.record('p', ErrorType.NotSent);
    await b.record('p', ErrorType.ProviderRejected);
    await b.record('p', ErrorType.OutcomeUnknown);
    await b.record('p', 'success', { kind: 'read' });
    await b.record('p', ErrorType.CircuitOpen); // our own refusal says nothing about the provider
    expect(await b.state('p')).toEqual({ kind: 'closed', failures: 1 });
    await b.record('p', ErrorType.ProviderUnavailable);
    expect(await b.acquire('p')).toEqual({ allowed: true });
    await b.record('p', ErrorType.NotSent, { kind: 'read' });
    expect(await b.state('p')).toEqual({ kind: 'open', until: now + 10_000 });
    expect(await b.acquire('p')).toEqual({ allowed: false, retryAfterMs: 10_000, reason: 'open' });
    expect(await b.acquire('other')).toEqual({ allowed: true });
  });

  it('a failure rate over the sliding window opens it', async () => {
    const window = { durationMs: 10_000, failureRate: 0.5, minimumCalls: 4 };
    const b = await store({ failureThreshold: 100, window, cooldownMs: 10_000, ...clock });
    await b.record('p', ErrorType.NotSent);
    await b.record('p', 'success');
    now += 10_000; // both slide out
    await b.record('p', ErrorType.NotSent);
    await b.record('p', 'success');
    await b.record('p', 'success');
    expect((await b.state('p')).kind).toBe('closed');
    await b.record('p', ErrorType.OutcomeUnknown); // 2 of 4
    expect(await b.state('p')).toEqual({ kind: 'open', until: now + 10_000 });
  });

  it('half-open: one probe; reads and stale tokens do not decide; the probe closes or re-opens it', async () => {
    const b = await store({ failureThreshold: 2, cooldownMs: 10_000, probeTimeoutMs: 5_000, ...clock });
    await b.record('p', ErrorType.NotSent);
    await b.record('p', ErrorType.NotSent);
    now += 10_000;
    const probe = await b.acquire('p');
    expect(probe).toEqual({ allowed: true, probe: expect.any(String) });
    expect(await b.acquire('p')).toEqual({ allowed: false, retryAfterMs: 5_000, reason: 'probe_in_flight' });
    await b.record('p', 'success', { kind: 'read' });
    await b.record('p', 'success', { kind: 'write' });
    await b.record('p', 'success', { kind: 'write', probe: 'not-the-probe' });
    expect(await b.state('p')).toEqual({ kind: 'half_open', probeUntil: now + 5_000 });
    await b.record('p', ErrorType.ProviderUnavailable, breakerReport('idempotent-write', probe));
    expect(await b.state('p')).toEqual({ kind: 'open', until: now + 10_000 });
    now += 10_000;
    const lost = await b.acquire('p');
    now += 5_000; // the probe's worker died: after its timeout another probe goes
    const next = await b.acquire('p');
    expect(next).toEqual({ allowed: true, probe: expect.any(String) });
    await b.record('p', 'success', breakerReport('idempotent-write', lost));
    expect((await b.state('p')).kind).toBe('half_open');
    await b.record('p', 'success', breakerReport('idempotent-write', next));
    expect(await b.state('p')).toEqual({ kind: 'closed', failures: 0 });
    expect(await b.acquire('p')).toEqual({ allowed: true });
  });

  it('a cool-down refuses writes until it ends, the longest one wins, and it grants no probe', async () => {
    const b = await store({ failureThreshold: 1, cooldownMs: 1_000, ...clock });
    await b.record('p', ErrorType.ProviderUnavailable, { coolDownMs: 3_000 });
    await b.record('p', ErrorType.ProviderUnavailable, { coolDownMs: 1_000 });
    now += 1_000; // the breaker's open period is over, the cool-down is not
    expect(await b.acquire('p')).toEqual({ allowed: false, retryAfterMs: 2_000, reason: 'cool_down' });
    now += 2_000;
    expect(await b.acquire('p')).toEqual({ allowed: true, probe: expect.any(String) });
  });
});
