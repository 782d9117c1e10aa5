/**
 * One table of cases for both breaker stores: the in-process one and the Redis one (a real redis-server on a free
 * port), so the Lua script and the TypeScript state machine and counting strategy cannot drift apart. Injected clock.
 */
import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import {
  type BreakerObserver,
  type BreakerOptions,
  type InspectableBreaker,
  InMemoryCircuitBreaker,
  breakerReport,
} from '../../src/breaker';
import { RedisCircuitBreaker, closeBreakerRedis, connectBreakerRedis, redisReady } from '../../src/breaker/redis';
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

  it('half-open: a probe whose write never reached the provider gives its slot back and decides nothing', async () => {
    const probes: string[] = [];
    const observer: BreakerObserver = { onProbe: (e) => probes.push(e.result) };
    const b = await store({ failureThreshold: 2, cooldownMs: 10_000, probeTimeoutMs: 5_000, ...clock, observer });
    await b.record('p', ErrorType.NotSent);
    await b.record('p', ErrorType.NotSent);
    now += 10_000;
    // The probe's attempt was cut off before its write left (its look-up before the resend failed): not re-opened.
    const cutOff = await b.acquire('p');
    await b.record('p', ErrorType.NotSent, breakerReport('non-idempotent-write', cutOff, undefined, false));
    expect(await b.state('p')).toEqual({ kind: 'half_open', probeUntil: 0 });
    // The slot is free at once: the next write is the probe, without waiting out the probe timeout.
    const recovered = await b.acquire('p');
    expect(recovered).toEqual({ allowed: true, probe: expect.any(String) });
    // Its write was found committed by the look-up before the resend: a read's success, which closes nothing.
    await b.record('p', 'success', breakerReport('non-idempotent-write', recovered, undefined, false));
    expect(await b.state('p')).toEqual({ kind: 'half_open', probeUntil: 0 });
    // Only a write that reached the provider decides.
    const sent = await b.acquire('p');
    expect(sent).toEqual({ allowed: true, probe: expect.any(String) });
    await b.record('p', 'success', breakerReport('non-idempotent-write', sent, undefined, true));
    expect(await b.state('p')).toEqual({ kind: 'closed', failures: 0 });
    expect(probes).toEqual(['sent', 'released', 'sent', 'released', 'sent', 'succeeded']);
  });

  it('tells its observer of every transition, probe, cool-down and refusal, once each, in order', async () => {
    const events: string[] = [];
    const observer: BreakerObserver = {
      onTransition: (e) => events.push(`${e.provider} ${e.from}->${e.to} @${e.atMs - start}`),
      onProbe: (e) => events.push(`${e.provider} probe ${e.result} @${e.atMs - start}`),
      onCoolDown: (e) => events.push(`${e.provider} cool-down ${e.coolDownMs} until @${e.untilMs - start}`),
      onRefusal: (e) => events.push(`${e.provider} refused ${e.reason} ${e.retryAfterMs}`),
    };
    const start = now;
    const b = await store({ failureThreshold: 2, cooldownMs: 10_000, probeTimeoutMs: 5_000, ...clock, observer });
    await b.record('p', ErrorType.NotSent);
    await b.record('p', 'success', { kind: 'read' });
    await b.record('p', ErrorType.NotSent); // the trip
    await b.record('p', ErrorType.NotSent); // already open: nothing new
    await b.acquire('p');
    now += 10_000;
    const first = await b.acquire('p');
    await b.acquire('p');
    await b.record('p', 'success', { kind: 'write' }); // not the probe: nothing
    await b.record('p', ErrorType.OutcomeUnknown, breakerReport('idempotent-write', first));
    now += 10_000;
    const lost = await b.acquire('p');
    now += 5_000; // the lost probe's slot is taken again: a probe, but no transition
    const second = await b.acquire('p');
    await b.record('p', 'success', breakerReport('idempotent-write', lost)); // stale token: nothing
    await b.record('p', 'success', breakerReport('idempotent-write', second));
    await b.record('q', ErrorType.ProviderUnavailable, { coolDownMs: 3_000 });
    // A shorter one moves nothing (no cool-down event); as a second failure in a row it trips q.
    await b.record('q', ErrorType.ProviderUnavailable, { coolDownMs: 1_000 });
    await b.acquire('q');
    expect(events).toEqual([
      'p closed->open @0',
      'p refused open 10000',
      'p open->half_open @10000',
      'p probe sent @10000',
      'p refused probe_in_flight 5000',
      'p probe failed @10000',
      'p half_open->open @10000',
      'p open->half_open @20000',
      'p probe sent @20000',
      'p probe sent @25000',
      'p probe succeeded @25000',
      'p half_open->closed @25000',
      'q cool-down 3000 until @28000',
      'q closed->open @25000',
      'q refused cool_down 3000',
    ]);
  });

  it('an observer that throws changes no decision', async () => {
    const boom = () => {
      throw new Error('metrics are down');
    };
    const observer: BreakerObserver = { onTransition: boom, onProbe: boom, onCoolDown: boom, onRefusal: boom };
    const b = await store({ failureThreshold: 1, cooldownMs: 1_000, ...clock, observer });
    await b.record('p', ErrorType.NotSent);
    expect(await b.acquire('p')).toEqual({ allowed: false, retryAfterMs: 1_000, reason: 'open' });
    now += 1_000;
    const probe = await b.acquire('p');
    expect(probe).toEqual({ allowed: true, probe: expect.any(String) });
    await b.record('p', 'success', { ...breakerReport('idempotent-write', probe), coolDownMs: 500 });
    expect(await b.state('p')).toEqual({ kind: 'closed', failures: 0 });
    expect(await b.acquire('p')).toEqual({ allowed: false, retryAfterMs: 500, reason: 'cool_down' });
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
