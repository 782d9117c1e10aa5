/**
 * What a half-open breaker's probe proves, through the real activities against the real simulator over HTTP, with both
 * breaker stores (the in-process one and the Redis one on a real redis-server): only a write that reached the provider
 * decides. A probe whose write was never sent (its look-up before the resend failed, or found the write already
 * committed) gives its slot back: it neither re-opens the breaker nor closes it. A probe refused at connect did reach
 * for the provider: it re-opens it.
 */
import { randomUUID } from 'node:crypto';
import { ApplicationFailure } from '@temporalio/common';
import { MockActivityEnvironment } from '@temporalio/testing';
import { DefaultLogger } from '@temporalio/worker';
import type { Redis } from 'ioredis';
import { pino } from 'pino';
import { type Activities, createActivities } from '../../src/activities';
import { type InspectableBreaker, InMemoryCircuitBreaker } from '../../src/breaker';
import { RedisCircuitBreaker, closeBreakerRedis, connectBreakerRedis, redisReady } from '../../src/breaker/redis';
import { ErrorType } from '../../src/domain/errors';
import {
  RestProvider,
  simulatorCapabilities,
  simulatorCapabilitiesWithoutKeys,
} from '../../src/providers/rest/adapter';
import { type RunningSimulator, startSimulator } from '../../src/simulator/server';
import { type RunningRedis, startRedisServer } from '../../scripts/lib/redis-server';
import { refusedPort } from '../helpers/net';

let sim: RunningSimulator;
let redisServer: RunningRedis;
const clients: Redis[] = [];
const providers: RestProvider[] = [];

beforeAll(async () => {
  [sim, redisServer] = await Promise.all([startSimulator({ port: 0 }), startRedisServer()]);
});
afterEach(async () => {
  sim.clearFaults();
  await Promise.all(providers.splice(0).map((p) => p.close()));
});
afterAll(async () => {
  await Promise.all(clients.map(closeBreakerRedis));
  await Promise.all([sim?.close(), redisServer?.stop()]);
});

const cooldownMs = 5_000;
const options = (now: () => number) => ({ failureThreshold: 3, cooldownMs, probeTimeoutMs: 20_000, now });
type Store = (now: () => number) => Promise<InspectableBreaker>;
const inProcess: Store = async (now) => new InMemoryCircuitBreaker(options(now));
const redis: Store = async (now) => {
  const client = connectBreakerRedis(redisServer.url);
  clients.push(client);
  if (!(await redisReady(client, 5_000))) throw new Error('redis not ready');
  return new RedisCircuitBreaker(client, { ...options(now), keyPrefix: `t:${randomUUID()}:` });
};

const attemptEnv = (attempt: number, heartbeatDetails?: unknown) =>
  new MockActivityEnvironment(
    {
      attempt,
      scheduledTimestampMs: Date.now() - 1_000,
      currentAttemptScheduledTimestampMs: Date.now(),
      scheduleToCloseTimeoutMs: 120_000,
      startToCloseTimeoutMs: 15_000,
      ...(heartbeatDetails === undefined ? {} : { heartbeatDetails }),
    },
    { logger: new DefaultLogger('ERROR') },
  );

const run = <A extends unknown[], R>(env: MockActivityEnvironment, fn: (...args: A) => Promise<R>, ...args: A) =>
  env.run(fn, ...args) as Promise<R>;

async function failureOf(p: Promise<unknown>): Promise<ApplicationFailure> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(ApplicationFailure);
    return err as ApplicationFailure;
  }
  throw new Error('expected the activity to fail');
}

describe.each([
  ['in-process', inProcess],
  ['redis', redis],
])('%s store', (_name, store) => {
  let now = 0;
  const clock = () => now;
  beforeEach(() => {
    now = Date.now();
  });

  /** A merchant (without keys unless told), its activities over `breaker`, and an authorized payment. */
  async function setup(opts: { keys?: boolean; baseUrl?: string } = {}) {
    const apiKey = `sk_test_${randomUUID()}`;
    const keys = opts.keys ?? false;
    await sim.setMerchant(apiKey, { idempotency: keys });
    const provider = new RestProvider({
      name: 'simulator',
      baseUrl: opts.baseUrl ?? sim.url,
      apiKey,
      capabilities: keys ? simulatorCapabilities() : simulatorCapabilitiesWithoutKeys(),
      connectTimeoutMs: 500,
      totalTimeoutMs: 2_000,
      logger: pino({ level: 'silent' }),
    });
    providers.push(provider);
    const breaker = await store(clock);
    const acts: Activities = createActivities({
      providers: { simulator: provider },
      logger: pino({ level: 'silent' }),
      breaker,
      random: () => 0.5,
      now: clock,
    });
    const merchantId = `m_${randomUUID().slice(0, 8)}`;
    return { apiKey, provider, breaker, acts, merchantId };
  }

  /** Trips the breaker and lets its open period pass: the next write is the half-open probe. */
  async function halfOpenNext(breaker: InspectableBreaker) {
    for (let i = 0; i < 3; i++) await breaker.record('simulator', ErrorType.NotSent);
    expect((await breaker.state('simulator')).kind).toBe('open');
    now += cooldownMs;
  }

  /** An authorized payment at the simulator (made straight through the provider: the breaker sees nothing). */
  async function authorized(s: Awaited<ReturnType<typeof setup>>) {
    const created = await s.provider.createPayment(
      {
        amount: 1_000,
        currency: 'EUR',
        reference: `order-${randomUUID()}`,
        paymentMethod: 'pm_card_visa',
        capture: 'manual',
      },
      { idempotencyKey: `create-${randomUUID()}`, attempt: 1 },
    );
    if (created.outcome !== 'authorized' && created.outcome !== 'succeeded') throw new Error('not authorized');
    return created.payment.id;
  }

  const captureArgs = (s: Awaited<ReturnType<typeof setup>>, paymentId: string) => ({
    provider: 'simulator',
    merchantId: s.merchantId,
    key: `cap-${randomUUID()}`,
    paymentId,
    amount: 1_000,
    amountCapturedBefore: 0,
  });

  const captureRequests = (apiKey: string) =>
    sim.ledger(apiKey).requests.filter((r) => r.operation === 'capture').length;

  it('a write recovered by its look-up before the resend (nothing sent) does not close the breaker; the slot is free', async () => {
    const s = await setup();
    const paymentId = await authorized(s);
    // Attempt 1 committed the capture, its answer was lost: attempt 2 (the probe) finds it and sends nothing.
    await s.provider.capturePayment(paymentId, { amount: 1_000 }, { idempotencyKey: '', attempt: 1 });
    await halfOpenNext(s.breaker);
    const found = await run(attemptEnv(2), s.acts.capturePayment, captureArgs(s, paymentId));
    expect(found).toMatchObject({ amountCaptured: 1_000 });
    expect(captureRequests(s.apiKey)).toBe(1); // only the committed one: the probe wrote nothing
    expect(await s.breaker.state('simulator')).toEqual({ kind: 'half_open', probeUntil: 0 });
    expect(await s.breaker.acquire('simulator')).toEqual({ allowed: true, probe: expect.any(String) });
  });

  it('a probe whose write never left (its look-up before the resend failed) does not re-open the breaker', async () => {
    const s = await setup();
    const paymentId = await authorized(s);
    await halfOpenNext(s.breaker);
    sim.addFaults({ rules: [{ match: { operation: 'lookup' }, fault: 'status', status: 500, times: 1 }] });
    // Attempt 1 sent nothing and closed its record (refused before sending).
    const attempt1 = { everSent: false, everUnknown: false, inFlight: false, sends: 0, closedBy: 1 };
    const f = await failureOf(run(attemptEnv(2, attempt1), s.acts.capturePayment, captureArgs(s, paymentId)));
    expect(f).toMatchObject({ type: ErrorType.NotSent, nonRetryable: false });
    expect(f.details?.[0]).toMatchObject({ reason: 'lookup_before_resend_failed', everSent: false });
    expect(captureRequests(s.apiKey)).toBe(0);
    expect(await s.breaker.state('simulator')).toEqual({ kind: 'half_open', probeUntil: 0 });
    // The next write is the probe; it reaches the provider, and its success closes the breaker.
    const captured = await run(attemptEnv(1), s.acts.capturePayment, captureArgs(s, paymentId));
    expect(captured).toMatchObject({ amountCaptured: 1_000 });
    expect(await s.breaker.state('simulator')).toEqual({ kind: 'closed', failures: 0 });
  });

  it('a probe refused at connect did reach for the provider: it re-opens the breaker', async () => {
    const s = await setup({ keys: true, baseUrl: `http://127.0.0.1:${await refusedPort()}` });
    await halfOpenNext(s.breaker);
    const f = await failureOf(run(attemptEnv(1), s.acts.capturePayment, captureArgs(s, 'pay_unreachable')));
    expect(f).toMatchObject({ type: ErrorType.NotSent });
    expect(f.details?.[0]).toMatchObject({ reason: 'connect_refused', everSent: false });
    expect(await s.breaker.state('simulator')).toEqual({ kind: 'open', until: now + cooldownMs });
  });
});
