/**
 * The shared breaker across "processes": each breaker instance has its own ioredis connection to one real
 * redis-server (started here on a free port), as two worker processes would. Injected clock; Redis really killed and
 * restarted for the fallback.
 */
import { randomUUID } from 'node:crypto';
import { type Redis } from 'ioredis';
import {
  type BreakerDecision,
  type BreakerObserver,
  type BreakerStoreEvent,
  InMemoryCircuitBreaker,
  breakerReport,
} from '../../src/breaker';
import { FallbackCircuitBreaker } from '../../src/breaker/fallback';
import { RedisCircuitBreaker, closeBreakerRedis, connectBreakerRedis, redisReady } from '../../src/breaker/redis';
import { ErrorType } from '../../src/domain/errors';
import { type RunningRedis, startRedisServer } from '../../scripts/lib/redis-server';
import { eventually } from '../helpers/eventually';

let server: RunningRedis;
const clients: Redis[] = [];
let now = 0;
const clock = () => now;

beforeAll(async () => {
  server = await startRedisServer();
});
afterAll(async () => {
  await Promise.all(clients.map(closeBreakerRedis));
  await server?.stop();
});
beforeEach(() => {
  now = 1_700_000_000_000;
});

const connect = async (url = server.url) => {
  const client = connectBreakerRedis(url);
  clients.push(client);
  if (!(await redisReady(client, 5_000))) throw new Error('redis not ready');
  return client;
};

/** Two breakers on two connections sharing one key prefix: two worker processes of one fleet. */
const twoProcesses = async (opts: { failureThreshold: number; cooldownMs: number; probeTimeoutMs?: number }) => {
  const keyPrefix = `t:${randomUUID()}:`;
  const [a, b] = await Promise.all([connect(), connect()]);
  return [
    new RedisCircuitBreaker(a, { ...opts, keyPrefix, now: clock }),
    new RedisCircuitBreaker(b, { ...opts, keyPrefix, now: clock }),
  ] as const;
};

it('a trip seen by one process opens the breaker for both; the probe of one closes it for both', async () => {
  const [a, b] = await twoProcesses({ failureThreshold: 3, cooldownMs: 10_000 });
  await a.record('sim', ErrorType.NotSent);
  await b.record('sim', ErrorType.NotSent); // failures count across processes
  await a.record('sim', ErrorType.OutcomeUnknown);
  expect(await a.acquire('sim')).toEqual({ allowed: false, retryAfterMs: 10_000, reason: 'open' });
  expect(await b.acquire('sim')).toEqual({ allowed: false, retryAfterMs: 10_000, reason: 'open' });
  now += 10_000;
  const probe = await b.acquire('sim');
  expect(probe).toMatchObject({ allowed: true, probe: expect.any(String) });
  expect(await a.acquire('sim')).toMatchObject({ allowed: false, reason: 'probe_in_flight' });
  await b.record('sim', 'success', { kind: 'write', probe: probe.allowed ? probe.probe : undefined });
  expect(await a.acquire('sim')).toEqual({ allowed: true });
  expect(await b.acquire('sim')).toEqual({ allowed: true });
});

it('exactly one half-open probe across both processes when 40 writes race for it', async () => {
  const [a, b] = await twoProcesses({ failureThreshold: 1, cooldownMs: 10_000 });
  await a.record('sim', ErrorType.ProviderUnavailable);
  now += 10_000;
  // Pause the server so that every racer's script is sent before any of them runs: they truly overlap.
  const admin = await connect();
  await admin.client('PAUSE', 300);
  const sentAll: number[] = [];
  const answered: number[] = [];
  const racers = Array.from({ length: 40 }, (_, i) => {
    const d = (i % 2 === 0 ? a : b).acquire('sim').then((decision: BreakerDecision) => {
      answered.push(Date.now());
      return decision;
    });
    sentAll.push(Date.now());
    return d;
  });
  const decisions = await Promise.all(racers);
  expect(Math.max(...sentAll)).toBeLessThanOrEqual(Math.min(...answered));
  const allowed = decisions.filter((d) => d.allowed);
  expect(allowed).toHaveLength(1);
  expect(allowed[0]).toMatchObject({ probe: expect.any(String) });
  expect(decisions.filter((d) => !d.allowed && d.reason === 'probe_in_flight')).toHaveLength(39);
});

it('a cool-down one process learned of (429 Retry-After) holds back the writes of the other', async () => {
  const [a, b] = await twoProcesses({ failureThreshold: 5, cooldownMs: 10_000 });
  await a.record('sim', ErrorType.ProviderUnavailable, { kind: 'write', coolDownMs: 3_000 });
  expect(await b.acquire('sim')).toEqual({ allowed: false, retryAfterMs: 3_000, reason: 'cool_down' });
  expect(await b.acquire('other-provider')).toEqual({ allowed: true });
  now += 3_000;
  expect(await b.acquire('sim')).toEqual({ allowed: true });
  expect(await a.acquire('sim')).toEqual({ allowed: true });
});

it('each shared event is observed once, by the process whose call caused it: summed over the fleet, none twice', async () => {
  const keyPrefix = `t:${randomUUID()}:`;
  const seen = { a: [] as string[], b: [] as string[] };
  const observe = (list: string[]): BreakerObserver => ({
    onTransition: (e) => list.push(`${e.from}->${e.to}`),
    onProbe: (e) => list.push(`probe ${e.result}`),
    onCoolDown: (e) => list.push(`cool-down ${e.coolDownMs}`),
  });
  const opts = { failureThreshold: 2, cooldownMs: 10_000, keyPrefix, now: clock };
  const [ca, cb] = await Promise.all([connect(), connect()]);
  const a = new RedisCircuitBreaker(ca, { ...opts, observer: observe(seen.a) });
  const b = new RedisCircuitBreaker(cb, { ...opts, observer: observe(seen.b) });
  await a.record('sim', ErrorType.NotSent);
  await b.record('sim', ErrorType.ProviderUnavailable, { coolDownMs: 2_000 }); // b's call trips it
  await a.record('sim', ErrorType.NotSent); // already open
  now += 10_000;
  const racers = await Promise.all(Array.from({ length: 10 }, (_, i) => (i % 2 === 0 ? a : b).acquire('sim')));
  const probe = racers.find((d) => d.allowed);
  const prober = racers.indexOf(probe as BreakerDecision) % 2 === 0 ? a : b;
  await prober.record('sim', 'success', breakerReport('idempotent-write', probe as BreakerDecision));
  const probeEvents = ['open->half_open', 'probe sent', 'probe succeeded', 'half_open->closed'];
  expect(seen.b.slice(0, 2)).toEqual(['cool-down 2000', 'closed->open']);
  expect(seen.a).toEqual(prober === a ? probeEvents : []);
  expect(seen.b.slice(2)).toEqual(prober === b ? probeEvents : []);
});

it('Redis killed: each process falls back to its in-process breaker and says so; back on Redis when it returns', async () => {
  const own = await startRedisServer();
  try {
    const keyPrefix = `t:${randomUUID()}:`;
    const logs: string[] = [];
    const log = { warn: (_: object, msg: string) => logs.push(msg), info: (_: object, msg: string) => logs.push(msg) };
    const opts = { failureThreshold: 2, cooldownMs: 10_000, keyPrefix, now: clock };
    const [ca, cb] = await Promise.all([connect(own.url), connect(own.url)]);
    const switches: string[] = [];
    const onStoreChange = (who: string) => (e: BreakerStoreEvent) => switches.push(`${who} ${e.store}`);
    const a = new FallbackCircuitBreaker(new RedisCircuitBreaker(ca, opts), new InMemoryCircuitBreaker(opts), log, {
      onStoreChange: onStoreChange('a'),
    });
    const b = new FallbackCircuitBreaker(new RedisCircuitBreaker(cb, opts), new InMemoryCircuitBreaker(opts), log, {
      onStoreChange: onStoreChange('b'),
    });

    await a.record('sim', ErrorType.NotSent);
    await a.record('sim', ErrorType.NotSent);
    expect(await b.acquire('sim')).toMatchObject({ allowed: false, reason: 'open' }); // shared

    await own.kill();
    await eventually('both connections to notice', () => ca.status !== 'ready' && cb.status !== 'ready', 10_000, 20);
    // Payments go on: b's own breaker is closed; what b sees now stays in b.
    expect(await b.acquire('sim')).toEqual({ allowed: true });
    expect(b.store).toBe('local');
    await b.record('sim', ErrorType.NotSent);
    await b.record('sim', ErrorType.NotSent);
    expect(await b.acquire('sim')).toMatchObject({ allowed: false, reason: 'open' });
    expect(await a.acquire('sim')).toEqual({ allowed: true });
    expect(logs.filter((m) => m.includes('unreachable'))).toHaveLength(2); // once per process, not per call

    const again = await startRedisServer({ port: own.port }); // the same address, empty (no persistence)
    try {
      await eventually('both connections to be back', () => ca.status === 'ready' && cb.status === 'ready', 10_000, 20);
      expect(await b.acquire('sim')).toEqual({ allowed: true }); // Redis's state wins: a fresh, closed breaker
      expect(b.store).toBe('shared');
      await a.record('sim', ErrorType.NotSent);
      await a.record('sim', ErrorType.NotSent);
      expect(await b.acquire('sim')).toMatchObject({ allowed: false, reason: 'open' }); // shared again
      expect(logs.filter((m) => m.includes('using it again'))).toHaveLength(2);
      expect(switches).toEqual(['b local', 'a local', 'b shared', 'a shared']);
      await Promise.all([ca, cb].map(closeBreakerRedis)); // the workers stop before their Redis does
    } finally {
      await again.stop();
    }
  } finally {
    await own.stop();
  }
});
