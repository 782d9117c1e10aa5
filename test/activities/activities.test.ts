/**
 * The activities against the REAL simulator over HTTP (no HTTP mocks), run in a MockActivityEnvironment (no Temporal
 * server): each test sets the attempt and the schedule timestamps Temporal would give it.
 */
import { randomUUID } from 'node:crypto';
import type { Info } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import { MockActivityEnvironment } from '@temporalio/testing';
import { DefaultLogger } from '@temporalio/worker';
import { pino } from 'pino';
import { createActivities, providerIdempotencyKey, type ActivityDeps, type Activities } from '../../src/activities';
import { InMemoryCircuitBreaker } from '../../src/breaker';
import { ErrorType } from '../../src/domain/errors';
import {
  RestProvider,
  simulatorCapabilities,
  simulatorCapabilitiesWithoutKeys,
} from '../../src/providers/rest/adapter';
import type { PaymentProvider, ProviderCapabilities } from '../../src/providers/types';
import { startSimulator, type RunningSimulator } from '../../src/simulator/server';
import { eventually } from '../helpers/eventually';
import { refusedPort } from '../helpers/net';

let sim: RunningSimulator;
beforeAll(async () => {
  sim = await startSimulator({ port: 0 });
});
afterAll(async () => {
  await sim.close();
});

const providers: RestProvider[] = [];
afterEach(async () => {
  sim.clearFaults();
  await Promise.all(providers.splice(0).map((p) => p.close()));
});

interface Setup {
  readonly acts: Activities;
  readonly apiKey: string;
  readonly merchantId: string;
  readonly provider: RestProvider;
  readonly logs: string[];
  readonly breaker: InMemoryCircuitBreaker;
  /** Ledger rows of this test's api key. */
  effects(operation?: string): { operation: string; idempotency_key: string | null; amount: number }[];
}

/** A clock that moves only when told to. */
const manualClock = (startMs = Date.now()) => {
  let t = startMs;
  return { now: () => t, advance: (ms: number) => void (t += ms) };
};

/** A fresh merchant (api key) per test, with or without idempotency keys at the simulator. */
async function setup(
  opts: { keys?: boolean; baseUrl?: string; deps?: Partial<ActivityDeps>; now?: () => number } = {},
): Promise<Setup> {
  const keys = opts.keys ?? true;
  const apiKey = `sk_test_${randomUUID()}`;
  await sim.setMerchant(apiKey, { idempotency: keys });
  const capabilities: ProviderCapabilities = keys ? simulatorCapabilities() : simulatorCapabilitiesWithoutKeys();
  const logs: string[] = [];
  const logger = pino({ level: 'info' }, { write: (line: string) => void logs.push(line) });
  const provider = new RestProvider({
    name: 'simulator',
    baseUrl: opts.baseUrl ?? sim.url,
    apiKey,
    capabilities,
    connectTimeoutMs: 500,
    totalTimeoutMs: 2_000,
    logger: pino({ level: 'silent' }),
  });
  providers.push(provider);
  const breaker = new InMemoryCircuitBreaker({
    failureThreshold: 3,
    cooldownMs: 5_000,
    ...(opts.now === undefined ? {} : { now: opts.now }),
  });
  const acts = createActivities({
    providers: { simulator: provider },
    logger,
    breaker,
    random: () => 0.5,
    ...(opts.now === undefined ? {} : { now: opts.now }),
    ...opts.deps,
  });
  return {
    acts,
    apiKey,
    merchantId: `m_${randomUUID().slice(0, 8)}`,
    provider,
    logs,
    breaker,
    effects: (operation) =>
      sim.ledger(apiKey).effects.filter((e) => operation === undefined || e.operation === operation),
  };
}

/** The environment of attempt `attempt` of an activity first scheduled `elapsedMs` ago, 120 s budget, 15 s attempts. */
const attemptEnv = (attempt: number, elapsedMs = 0, info: Partial<Info> = {}) =>
  new MockActivityEnvironment(
    {
      attempt,
      scheduledTimestampMs: Date.now() - elapsedMs,
      currentAttemptScheduledTimestampMs: Date.now(),
      scheduleToCloseTimeoutMs: 120_000,
      startToCloseTimeoutMs: 15_000,
      ...info,
    },
    { logger: new DefaultLogger('ERROR') },
  );

/** Every heartbeat an attempt sends. */
const beatsOf = (env: MockActivityEnvironment) => {
  const beats: unknown[] = [];
  env.on('heartbeat', (d: unknown) => beats.push(d));
  return beats;
};

/**
 * Attempt `attempt` after attempts that ran here: as Temporal does, it starts from the details of the last heartbeat
 * the attempt before it recorded (a failure carries them). Call `.next()` with the env's beats for the next attempt.
 */
const chainedEnv = (attempt: number, elapsedMs: number, lastBeat: unknown) =>
  attemptEnv(attempt, elapsedMs, attempt > 1 ? { heartbeatDetails: lastBeat } : {});

/** `env.run` with the activity's own argument and result types (MockActivityEnvironment infers `unknown`). */
const run = <A extends unknown[], R>(env: MockActivityEnvironment, fn: (...args: A) => Promise<R>, ...args: A) =>
  env.run(fn, ...args) as Promise<R>;

/** The ApplicationFailure a run rejects with. */
async function failureOf(run: Promise<unknown>): Promise<ApplicationFailure> {
  try {
    await run;
  } catch (err) {
    expect(err).toBeInstanceOf(ApplicationFailure);
    return err as ApplicationFailure;
  }
  throw new Error('expected the activity to fail');
}

const charge = (
  s: Setup,
  key: string,
  patch: { reference?: string; capture?: 'automatic' | 'manual'; pm?: string } = {},
) => ({
  provider: 'simulator',
  merchantId: s.merchantId,
  key,
  input: {
    amount: 1_500,
    currency: 'EUR',
    reference: patch.reference ?? `order-${key}`,
    paymentMethod: patch.pm ?? 'pm_card_visa',
    capture: patch.capture ?? 'automatic',
  },
});

describe('createPayment', () => {
  it('sends the key derived from the scope, so a repeat is replayed, not charged twice', async () => {
    const s = await setup();
    const first = await run(attemptEnv(1), s.acts.createPayment, charge(s, 'k1'));
    expect(first).toMatchObject({ outcome: 'succeeded', replayed: false, recovered: false });
    const again = await run(attemptEnv(2), s.acts.createPayment, charge(s, 'k1'));
    expect(again).toMatchObject({ outcome: 'succeeded', replayed: true });
    expect(s.effects()).toHaveLength(1);
    expect(s.effects()[0]?.idempotency_key).toBe(providerIdempotencyKey(s.merchantId, 'create', 'k1'));
    expect(s.effects()[0]?.idempotency_key).not.toContain('k1');
  });

  it('a decline is an answer, not a failure', async () => {
    const s = await setup();
    await expect(
      run(attemptEnv(1), s.acts.createPayment, charge(s, 'k2', { pm: 'pm_decline_insufficient_funds' })),
    ).resolves.toEqual({
      outcome: 'declined',
      declineCode: 'insufficient_funds',
      sends: 1,
      // When the worker heard the answer: the payment's view takes it (payment-create.ts).
      at: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
    });
    expect(s.effects()).toHaveLength(0);
  });

  it('commit_then_drop with keys: OutcomeUnknown, retried with backoff; the retry gets the stored answer', async () => {
    const s = await setup();
    sim.addFaults({
      rules: [{ match: { operation: 'create', reference: 'order-k3' }, fault: 'commit_then_drop', times: 1 }],
    });
    const f = await failureOf(run(attemptEnv(1), s.acts.createPayment, charge(s, 'k3')));
    expect(f).toMatchObject({ type: ErrorType.OutcomeUnknown, nonRetryable: false, nextRetryDelay: 250 });
    expect(f.cause).toBeInstanceOf(Error);
    const retry = await run(attemptEnv(2, 300), s.acts.createPayment, charge(s, 'k3'));
    expect(retry).toMatchObject({ outcome: 'succeeded', replayed: true });
    expect(s.effects('create')).toHaveLength(1);
  });

  it('commit_then_drop without keys: OutcomeUnknown is final; attempt 2 finds the payment instead of charging again', async () => {
    const s = await setup({ keys: false });
    sim.addFaults({
      rules: [{ match: { operation: 'create', reference: 'order-k4' }, fault: 'commit_then_drop', times: 1 }],
    });
    const f = await failureOf(run(attemptEnv(1), s.acts.createPayment, charge(s, 'k4')));
    expect(f).toMatchObject({ type: ErrorType.OutcomeUnknown, nonRetryable: true });
    expect(f.nextRetryDelay).toBeUndefined();

    // Attempt 2 happens anyway when attempt 1 timed out or its worker died mid-call.
    const retry = await run(attemptEnv(2, 20_000), s.acts.createPayment, charge(s, 'k4'));
    expect(retry).toMatchObject({
      outcome: 'succeeded',
      recovered: true,
      payment: { amount: 1_500, reference: 'order-k4' },
    });
    expect(s.effects('create')).toHaveLength(1);
    const creates = sim.ledger(s.apiKey).requests.filter((r) => r.operation === 'create');
    expect(creates).toHaveLength(1); // looked up, never re-sent
  });

  it('without keys, attempt 2 sends when the look-up finds nothing (attempt 1 never reached the provider)', async () => {
    const s = await setup({ keys: false });
    const result = await run(attemptEnv(2, 5_000), s.acts.createPayment, charge(s, 'k5'));
    expect(result).toMatchObject({ outcome: 'succeeded', recovered: false });
    expect(s.effects('create')).toHaveLength(1);
  });

  it('without keys, an ambiguous look-up is an unknown outcome, never a guess', async () => {
    const s = await setup({ keys: false });
    for (const key of ['other-1', 'other-2']) {
      await run(attemptEnv(1), s.acts.createPayment, charge(s, key, { reference: 'order-shared' }));
    }
    const f = await failureOf(
      run(attemptEnv(2, 1_000), s.acts.createPayment, charge(s, 'k6', { reference: 'order-shared' })),
    );
    expect(f).toMatchObject({ type: ErrorType.OutcomeUnknown, nonRetryable: true });
    expect(f.details?.[0]).toMatchObject({ reason: 'ambiguous_lookup_before_resend' });
    expect(s.effects('create')).toHaveLength(2);
  });

  it('without keys, echoed metadata tells our payment from another of the same order', async () => {
    const s = await setup({ keys: false });
    const withMeta = (key: string) => {
      const c = charge(s, key, { reference: 'order-meta' });
      return { ...c, input: { ...c.input, metadata: { merchant_id: s.merchantId, payment_key: key } } };
    };
    await run(attemptEnv(1), s.acts.createPayment, withMeta('meta-other'));
    sim.addFaults({ rules: [{ match: { operation: 'create' }, fault: 'commit_then_drop', times: 1 }] });
    await failureOf(run(attemptEnv(1), s.acts.createPayment, withMeta('meta-mine')));
    const retry = await run(attemptEnv(2, 1_000), s.acts.createPayment, withMeta('meta-mine'));
    expect(retry).toMatchObject({ recovered: true, payment: { metadata: { payment_key: 'meta-mine' } } });
    expect(s.effects('create')).toHaveLength(2);
  });

  it('without keys, a failed look-up before resend is NotSent (retryable): nothing was sent this attempt', async () => {
    const s = await setup({ keys: false });
    sim.addFaults({ rules: [{ match: { operation: 'lookup' }, fault: 'status', status: 500, times: 1 }] });
    const f = await failureOf(run(attemptEnv(2, 1_000), s.acts.createPayment, charge(s, 'k7')));
    expect(f).toMatchObject({ type: ErrorType.NotSent, nonRetryable: false });
    expect(f.details?.[0]).toMatchObject({ reason: 'lookup_before_resend_failed' });
    expect(s.effects()).toHaveLength(0);
  });

  it('503 with Retry-After: ProviderUnavailable, nextRetryDelay = Retry-After', async () => {
    const s = await setup();
    sim.addFaults({
      rules: [{ match: { operation: 'create' }, fault: 'status', status: 503, retry_after_s: 7, times: 1 }],
    });
    const f = await failureOf(run(attemptEnv(1), s.acts.createPayment, charge(s, 'k8')));
    expect(f).toMatchObject({ type: ErrorType.ProviderUnavailable, nonRetryable: false, nextRetryDelay: 7_000 });
  });

  it('a budget spent by the server’s clock ends it, however little time passed on the worker’s: BudgetExhausted', async () => {
    // The time-skipping test server: the first attempt was scheduled a moment ago by this worker's clock, but the
    // server skipped its backoffs, and schedules this attempt 110 s of its time after the first (120 s budget, 15 s
    // attempts: no room for another). Before, the worker's clock alone counted, and the 503 was retried.
    const s = await setup();
    sim.addFaults({
      rules: [{ match: { operation: 'create' }, fault: 'status', status: 503, retry_after_s: 1, times: 1 }],
    });
    const now = Date.now();
    const env = attemptEnv(9, 0, { scheduledTimestampMs: now, currentAttemptScheduledTimestampMs: now + 110_000 });
    const f = await failureOf(run(env, s.acts.createPayment, charge(s, 'k8b')));
    expect(f).toMatchObject({ type: ErrorType.BudgetExhausted, nonRetryable: true });
    expect(f.details?.[0]).toMatchObject({ lastFailureType: ErrorType.ProviderUnavailable });
  });

  it('429 whose Retry-After does not fit the budget: BudgetExhausted, the 429 as cause', async () => {
    const s = await setup();
    sim.addFaults({
      rules: [{ match: { operation: 'create' }, fault: 'status', status: 429, retry_after_s: 60, times: 1 }],
    });
    const f = await failureOf(run(attemptEnv(5, 90_000), s.acts.createPayment, charge(s, 'k9')));
    expect(f).toMatchObject({ type: ErrorType.BudgetExhausted, nonRetryable: true });
    expect(f.details?.[0]).toMatchObject({ reason: 'retry-after', lastFailureType: ErrorType.ProviderUnavailable });
    expect((f.cause as ApplicationFailure).type).toBe(ErrorType.ProviderUnavailable);
  });

  it('connection refused: NotSent, retryable; the breaker opens and then answers CircuitOpen without calling', async () => {
    const port = await refusedPort();
    const clock = manualClock();
    const s = await setup({ baseUrl: `http://127.0.0.1:${port}`, now: clock.now });
    let last: unknown;
    for (let attempt = 1; attempt <= 3; attempt++) {
      const env = chainedEnv(attempt, 1_000, last);
      const beats = beatsOf(env);
      const f = await failureOf(run(env, s.acts.createPayment, charge(s, 'k10')));
      expect(f).toMatchObject({ type: ErrorType.NotSent, nonRetryable: false });
      last = beats.at(-1);
    }
    // Opened at the third failure with a 5 s cool-down; 1.5 s later the breaker asks for exactly the 3.5 s left.
    clock.advance(1_500);
    const open = await failureOf(run(chainedEnv(4, 2_000, last), s.acts.createPayment, charge(s, 'k10')));
    expect(open).toMatchObject({ type: ErrorType.CircuitOpen, nonRetryable: false, nextRetryDelay: 3_500 });
    expect(open.details?.[0]).toMatchObject({ everSent: false, everUnknown: false });
  });

  it('an open breaker stops writes but not the lookups a reconcile needs to learn the truth', async () => {
    const s = await setup();
    for (let i = 0; i < 3; i++) s.breaker.record('simulator', ErrorType.NotSent);
    const write = await failureOf(run(attemptEnv(1), s.acts.createPayment, charge(s, 'k11')));
    expect(write.type).toBe(ErrorType.CircuitOpen);
    expect(sim.ledger(s.apiKey).requests).toHaveLength(0); // the write never left
    const found = await run(attemptEnv(1), s.acts.lookupPayment, {
      provider: 'simulator',
      merchantId: s.merchantId,
      key: 'k11',
      operation: 'create',
      reference: 'order-none',
    });
    expect(found).toBeNull();
    expect(sim.ledger(s.apiKey).requests.map((r) => r.operation)).toEqual(['lookup']);
  });
});

describe('capture, void, refund', () => {
  const authorize = async (s: Setup, key: string) => {
    const r = await run(attemptEnv(1), s.acts.createPayment, charge(s, key, { capture: 'manual' }));
    if (r.outcome === 'declined') throw new Error('declined');
    return r.payment.id;
  };

  it('capture in part, refund, void: each under its own derived key', async () => {
    const s = await setup();
    const id = await authorize(s, 'p1');
    const captured = await run(attemptEnv(1), s.acts.capturePayment, {
      provider: 'simulator',
      merchantId: s.merchantId,
      key: 'cap-1',
      paymentId: id,
      amount: 1_000,
    });
    expect(captured).toMatchObject({ status: 'succeeded', amountCaptured: 1_000 });
    const refunded = await run(attemptEnv(1), s.acts.refundPayment, {
      provider: 'simulator',
      merchantId: s.merchantId,
      key: 'ref-1',
      paymentId: id,
      amount: 400,
      amountRefundedBefore: 0,
    });
    expect(refunded).toMatchObject({ recovered: false, refund: { amount: 400 }, payment: { amountRefunded: 400 } });
    expect(s.effects().map((e) => [e.operation, e.idempotency_key])).toEqual([
      ['create', providerIdempotencyKey(s.merchantId, 'create', 'p1')],
      ['capture', providerIdempotencyKey(s.merchantId, 'capture', 'cap-1')],
      ['refund', providerIdempotencyKey(s.merchantId, 'refund', 'ref-1')],
    ]);

    const other = await authorize(s, 'p2');
    const voided = await run(attemptEnv(1), s.acts.voidPayment, {
      provider: 'simulator',
      merchantId: s.merchantId,
      key: 'p2',
      paymentId: other,
    });
    expect(voided.status).toBe('voided');
  });

  it('capture over the authorized amount: ProviderRejected, non-retryable', async () => {
    const s = await setup();
    const id = await authorize(s, 'p3');
    const f = await failureOf(
      run(attemptEnv(1), s.acts.capturePayment, {
        provider: 'simulator',
        merchantId: s.merchantId,
        key: 'cap-3',
        paymentId: id,
        amount: 99_999,
      }),
    );
    expect(f).toMatchObject({ type: ErrorType.ProviderRejected, nonRetryable: true });
    expect(f.details?.[0]).toMatchObject({ status: 400, code: 'amount_too_large' });
  });

  it.each(['capture', 'void', 'refund'] as const)(
    'without keys, %s after commit_then_drop: unknown on attempt 1, recovered on attempt 2, one effect',
    async (operation) => {
      const s = await setup({ keys: false });
      const key = `p-${operation}`;
      const id =
        operation === 'refund'
          ? ((await run(attemptEnv(1), s.acts.createPayment, charge(s, key))) as { payment: { id: string } }).payment.id
          : await authorize(s, key);
      sim.addFaults({ rules: [{ match: { operation }, fault: 'commit_then_drop', times: 1 }] });
      const base = { provider: 'simulator', merchantId: s.merchantId, key: `${operation}-key`, paymentId: id };
      const attemptOf = (attempt: number): Promise<unknown> =>
        operation === 'capture'
          ? run(attemptEnv(attempt, 1_000), s.acts.capturePayment, { ...base, amount: 1_500 })
          : operation === 'void'
            ? run(attemptEnv(attempt, 1_000), s.acts.voidPayment, base)
            : run(attemptEnv(attempt, 1_000), s.acts.refundPayment, { ...base, amount: 500, amountRefundedBefore: 0 });

      const f = await failureOf(attemptOf(1));
      expect(f).toMatchObject({ type: ErrorType.OutcomeUnknown, nonRetryable: true });
      const recovered = await attemptOf(2);
      if (operation === 'refund')
        expect(recovered).toMatchObject({ recovered: true, refund: null, payment: { amountRefunded: 500 } });
      else expect(recovered).toMatchObject({ status: operation === 'void' ? 'voided' : 'succeeded' });
      expect(s.effects(operation)).toHaveLength(1);
    },
  );
});

describe('lookupPayment and listProviderPayments', () => {
  it('finds a charge by its derived key, a payment by id, and answers null for nothing', async () => {
    const s = await setup();
    const created = await run(attemptEnv(1), s.acts.createPayment, charge(s, 'l1'));
    if (created.outcome === 'declined') throw new Error('declined');
    const args = {
      provider: 'simulator',
      merchantId: s.merchantId,
      operation: 'create' as const,
      reference: 'order-l1',
    };
    expect(await run(attemptEnv(1), s.acts.lookupPayment, { ...args, key: 'l1' })).toMatchObject({
      id: created.payment.id,
    });
    expect(
      await run(attemptEnv(1), s.acts.lookupPayment, { ...args, key: 'never-sent', reference: 'order-none' }),
    ).toBeNull();
    expect(
      await run(attemptEnv(1), s.acts.lookupPayment, {
        ...args,
        key: 'x',
        operation: 'refund',
        paymentId: created.payment.id,
      }),
    ).toMatchObject({ id: created.payment.id });
  });

  it('without keys, looks up by reference, narrowed by amount and currency', async () => {
    const s = await setup({ keys: false });
    await run(attemptEnv(1), s.acts.createPayment, charge(s, 'l2', { reference: 'order-l2' }));
    const args = {
      provider: 'simulator',
      merchantId: s.merchantId,
      key: 'l2',
      operation: 'create' as const,
      reference: 'order-l2',
    };
    expect(
      await run(attemptEnv(1), s.acts.lookupPayment, { ...args, match: { amount: 1_500, currency: 'EUR' } }),
    ).toMatchObject({
      reference: 'order-l2',
    });
    expect(
      await run(attemptEnv(1), s.acts.lookupPayment, { ...args, match: { amount: 1_501, currency: 'EUR' } }),
    ).toBeNull();
  });

  it('a failing lookup is retryable even as OutcomeUnknown: reads are always safe', async () => {
    const s = await setup({ keys: false });
    sim.addFaults({ rules: [{ match: { operation: 'lookup' }, fault: 'status', status: 502, times: 1 }] });
    const f = await failureOf(
      run(attemptEnv(1), s.acts.lookupPayment, {
        provider: 'simulator',
        merchantId: s.merchantId,
        key: 'l3',
        operation: 'create',
        reference: 'order-l3',
      }),
    );
    expect(f).toMatchObject({ type: ErrorType.OutcomeUnknown, nonRetryable: false });
  });

  it('lists payments by creation time', async () => {
    const s = await setup();
    await run(attemptEnv(1), s.acts.createPayment, charge(s, 'l4'));
    const page = await run(attemptEnv(1), s.acts.listProviderPayments, {
      provider: 'simulator',
      createdGte: 0,
      limit: 10,
    });
    expect(page.data.map((p) => p.reference)).toContain('order-l4');
  });
});

describe('plumbing', () => {
  it('describeProvider answers the capability flags; an unknown provider is a non-retryable ValidationError', async () => {
    const s = await setup({ keys: false });
    expect(await run(attemptEnv(1), s.acts.describeProvider, 'simulator')).toEqual({
      ...simulatorCapabilitiesWithoutKeys(),
      // What one attempt may take: this client's 2 s deadline per call, 5 pages for a look-up by reference.
      callLimits: { callTimeoutMs: 2_000, referencePages: 5 },
    });
    const f = await failureOf(run(attemptEnv(1), s.acts.describeProvider, 'acme'));
    expect(f).toMatchObject({ type: ErrorType.ValidationError, nonRetryable: true });
  });

  it('logs activity, attempt, keyHash and outcome, never the key, the token or the api key', async () => {
    const s = await setup();
    sim.addFaults({ rules: [{ match: { operation: 'create' }, fault: 'status', status: 503, times: 1 }] });
    const key = 'secret-user-key-123';
    await failureOf(run(attemptEnv(1), s.acts.createPayment, charge(s, key, { pm: 'pm_card_secret_token' })));
    await run(attemptEnv(2, 1_000), s.acts.createPayment, charge(s, key, { pm: 'pm_card_secret_token' }));
    const lines = s.logs.map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines.map((l) => [l.activity, l.attempt, l.outcome])).toEqual([
      ['createPayment', 1, ErrorType.ProviderUnavailable],
      ['createPayment', 2, 'succeeded'],
    ]);
    expect(lines.every((l) => typeof l.keyHash === 'string' && l.provider === 'simulator')).toBe(true);
    const all = s.logs.join('\n');
    for (const secret of [key, 'pm_card_secret_token', s.apiKey, providerIdempotencyKey(s.merchantId, 'create', key)]) {
      expect(all).not.toContain(secret);
    }
  });

  it('an unexpected error from a provider is an unknown outcome (typed fake provider)', async () => {
    const broken: PaymentProvider = {
      name: 'broken',
      capabilities: simulatorCapabilitiesWithoutKeys(),
      createPayment: () => Promise.reject(new TypeError('undefined is not a function')),
      capturePayment: () => Promise.reject(new TypeError('x')),
      voidPayment: () => Promise.reject(new TypeError('x')),
      refundPayment: () => Promise.reject(new TypeError('x')),
      getPayment: () => Promise.resolve(null),
      findByIdempotencyKey: () => Promise.resolve(null),
      findByReference: () => Promise.resolve([]),
      listPayments: () => Promise.resolve({ data: [], hasMore: false }),
    };
    const acts = createActivities({ providers: { broken }, logger: pino({ level: 'silent' }) });
    const f = await failureOf(
      run(attemptEnv(1), acts.createPayment, {
        provider: 'broken',
        merchantId: 'm',
        key: 'k',
        input: { amount: 1, currency: 'EUR', reference: 'o', paymentMethod: 'pm', capture: 'automatic' },
      }),
    );
    expect(f).toMatchObject({ type: ErrorType.OutcomeUnknown, nonRetryable: true });
    expect(f.cause).toBeInstanceOf(TypeError);
  });
});

describe('attempt safety: heartbeats, what earlier attempts did, cancellation', () => {
  it('a write heartbeats its record right before it is sent and right after its outcome', async () => {
    const s = await setup();
    sim.addFaults({ rules: [{ match: { operation: 'create' }, fault: 'status', status: 500, times: 1 }] });
    const env = attemptEnv(1);
    const beats = beatsOf(env);
    const f = await failureOf(run(env, s.acts.createPayment, charge(s, 'h1')));
    expect(beats).toEqual([
      { everSent: false, everUnknown: false, inFlight: true, sends: 0 },
      { everSent: true, everUnknown: true, inFlight: false, sends: 1 },
      // The attempt's last word, which its failure carries to the next attempt: closed by attempt 1.
      { everSent: true, everUnknown: true, inFlight: false, sends: 1, closedBy: 1 },
    ]);
    expect(f).toMatchObject({ type: ErrorType.OutcomeUnknown, nonRetryable: false });
    expect(f.details?.[0]).toMatchObject({ everSent: true, everUnknown: true, sends: 1 });
  });

  it('counts the requests that may have left across attempts, never one refused before it was sent', async () => {
    const s = await setup();
    const earlier = { everSent: true, everUnknown: true, inFlight: false, sends: 2, closedBy: 2 };
    const ok = await run(attemptEnv(3, 1_000, { heartbeatDetails: earlier }), s.acts.createPayment, charge(s, 'n1'));
    expect(ok).toMatchObject({ outcome: 'succeeded', sends: 3 });
    // The breaker refuses: nothing left this attempt, the earlier ones' count stands.
    for (let i = 0; i < 3; i++) await s.breaker.record('simulator', ErrorType.ProviderUnavailable);
    const refused = await failureOf(
      run(attemptEnv(3, 1_000, { heartbeatDetails: earlier }), s.acts.createPayment, charge(s, 'n2')),
    );
    expect(refused.details?.[0]).toMatchObject({ type: ErrorType.CircuitOpen, everSent: true, sends: 2 });
  });

  it('an attempt refused by the breaker closes its record, first attempt included: the next one knows it sent nothing', async () => {
    const s = await setup();
    for (let i = 0; i < 3; i++) await s.breaker.record('simulator', ErrorType.ProviderUnavailable);
    const env = attemptEnv(1, 1_000);
    const beats = beatsOf(env);
    const f = await failureOf(run(env, s.acts.createPayment, charge(s, 'b1')));
    expect(f.details?.[0]).toMatchObject({ type: ErrorType.CircuitOpen, everSent: false });
    expect(beats).toEqual([{ everSent: false, everUnknown: false, inFlight: false, sends: 0, closedBy: 1 }]);
    const again = await failureOf(run(chainedEnv(2, 2_000, beats.at(-1)), s.acts.createPayment, charge(s, 'b1')));
    expect(again.details?.[0]).toMatchObject({ type: ErrorType.CircuitOpen, everSent: false, sends: 0 });
    expect(sim.ledger(s.apiKey).requests).toHaveLength(0);
  });

  it('a local first attempt that starts long after the task that scheduled it is a run again: what a dead worker may have sent is carried', async () => {
    const clock = manualClock();
    const s = await setup({ now: clock.now });
    for (let i = 0; i < 3; i++) await s.breaker.record('simulator', ErrorType.ProviderUnavailable);
    const attempt = (key: string, scheduledInTaskAtMs: number) =>
      failureOf(run(attemptEnv(1), s.acts.firstCreateAttempt, { ...charge(s, key), scheduledInTaskAtMs }));
    // Within the task's timeout (a just-restarted worker's slow first activation, 6 s in the soak on 8b64965): the
    // first attempt, refused, provably sent nothing.
    const first = await attempt('r1', clock.now() - 6_000);
    expect(first.details?.[0]).toMatchObject({ type: ErrorType.CircuitOpen, everSent: false, sends: 0 });
    expect(first.details?.at(-1)).not.toHaveProperty('rerunOfLost');
    // 12 s later (a dead worker's task handed on after its 10 s timeout): refused too, and cannot prove nothing left.
    const rerun = await attempt('r2', clock.now() - 12_000);
    expect(rerun.details?.[0]).toMatchObject({
      type: ErrorType.CircuitOpen,
      everSent: true,
      everUnknown: true,
      sends: 0,
    });
    expect(rerun.details?.at(-1)).toMatchObject({ rerunOfLost: true });
    expect(sim.ledger(s.apiKey).requests).toHaveLength(0); // neither left
  });

  it('a worker killed after its send, before a heartbeat said so: the attempts after it count it as possibly sent (issue 19, 10,000 soak)', async () => {
    // Attempt 1 was refused by the breaker and closed its record. Attempt 2 sent the create, and its worker was SIGKILLed
    // before the heartbeat of the send reached the server (heartbeats are throttled): the server still holds attempt 1's
    // record. Attempt 3 is refused by the breaker again: that proves nothing about attempt 2's send.
    const s = await setup();
    await run(attemptEnv(1), s.acts.createPayment, charge(s, 'w1')); // what attempt 2 did at the provider
    for (let i = 0; i < 3; i++) await s.breaker.record('simulator', ErrorType.ProviderUnavailable);
    const attempt1 = { everSent: false, everUnknown: false, inFlight: false, sends: 0, closedBy: 1 };
    const f = await failureOf(run(chainedEnv(3, 5_000, attempt1), s.acts.createPayment, charge(s, 'w1')));
    expect(f).toMatchObject({ type: ErrorType.CircuitOpen, nonRetryable: false });
    expect(f.details?.[0]).toMatchObject({ everSent: true, everUnknown: true, sends: 1 });
    // Its budget spent on refusals, the create ends with everSent: the workflow reconciles instead of calling it failed.
    const spent = await failureOf(run(chainedEnv(4, 119_000, attempt1), s.acts.createPayment, charge(s, 'w1')));
    expect(spent.details?.[0]).toMatchObject({ everSent: true, everUnknown: true });
    expect(sim.ledger(s.apiKey).effects.filter((e) => e.operation === 'create')).toHaveLength(1);
  });

  describe('a worker configured otherwise than the payment recorded (PROVIDER_* drift)', () => {
    const recorded = (s: Setup): ProviderCapabilities => ({
      ...s.provider.capabilities,
      callLimits: { callTimeoutMs: 9_000, referencePages: 5 },
    });

    it('with nothing sent before: a final ValidationError, nothing sent', async () => {
      const s = await setup();
      const f = await failureOf(
        run(attemptEnv(1), s.acts.createPayment, { ...charge(s, 'd1'), expectCapabilities: recorded(s) }),
      );
      expect(f).toMatchObject({ type: ErrorType.ValidationError, nonRetryable: true });
      expect(f.message).toMatch(/differ from this worker's.*nothing was sent/);
      // With when it refused: the payment is failed at that time, however late a task or a query applies it.
      expect(f.details?.[0]).toMatchObject({ everSent: false, sends: 0, at: expect.stringMatching(/^\d{4}-/) });
      expect(sim.ledger(s.apiKey).requests).toHaveLength(0);
    });

    it('after an attempt that may have been sent (a local first attempt, an earlier attempt, an unknown outcome): a retryable refusal that keeps the record', async () => {
      const s = await setup();
      const refusals = [
        run(attemptEnv(1), s.acts.createPayment, {
          ...charge(s, 'd2'),
          expectCapabilities: recorded(s),
          earlier: { everSent: true, everUnknown: true },
        }),
        run(
          attemptEnv(2, 1_000, { heartbeatDetails: { everSent: true, everUnknown: false, inFlight: false, sends: 1 } }),
          s.acts.createPayment,
          { ...charge(s, 'd3'), expectCapabilities: recorded(s) },
        ),
        run(attemptEnv(1), s.acts.createPayment, {
          ...charge(s, 'd4'),
          expectCapabilities: recorded(s),
          afterUnknown: true,
        }),
      ];
      for (const refusal of refusals) {
        const f = await failureOf(refusal);
        expect(f).toMatchObject({ type: ErrorType.NotSent, nonRetryable: false });
        expect(f.details?.[0]).toMatchObject({ reason: 'worker_config_mismatch', everSent: true });
      }
      expect(sim.ledger(s.apiKey).requests).toHaveLength(0);
    });
  });

  it('after an unknown attempt, a 401 on the retry is OutcomeUnknown rejected_after_unknown, non-retryable', async () => {
    const s = await setup();
    sim.addFaults({ rules: [{ match: { operation: 'create' }, fault: 'status', status: 401, times: 1 }] });
    const earlier = { everSent: true, everUnknown: true, inFlight: false };
    const f = await failureOf(
      run(attemptEnv(2, 1_000, { heartbeatDetails: earlier }), s.acts.createPayment, charge(s, 'h2')),
    );
    expect(f).toMatchObject({ type: ErrorType.OutcomeUnknown, nonRetryable: true });
    expect(f.details?.[0]).toMatchObject({ reason: 'rejected_after_unknown', status: 401, earlier, everUnknown: true });
    // The provider's refusal is kept as the cause.
    expect(((f.cause as Error).cause as Error & { type?: string }).type).toBe(ErrorType.ProviderRejected);
  });

  it('an attempt that ended with its write in flight counts as unknown for the next one', async () => {
    const s = await setup();
    sim.addFaults({ rules: [{ match: { operation: 'create' }, fault: 'status', status: 400, times: 1 }] });
    const f = await failureOf(
      run(
        attemptEnv(2, 1_000, { heartbeatDetails: { everSent: false, everUnknown: false, inFlight: true } }),
        s.acts.createPayment,
        charge(s, 'h3'),
      ),
    );
    expect(f).toMatchObject({ type: ErrorType.OutcomeUnknown, nonRetryable: true });
    expect(f.details?.[0]).toMatchObject({ reason: 'rejected_after_unknown' });
  });

  it('a refusal stays a refusal when no earlier outcome was unknown, or when it is about the key itself', async () => {
    const s = await setup();
    sim.addFaults({ rules: [{ match: { operation: 'create' }, fault: 'status', status: 401, times: 1 }] });
    const clean = { everSent: true, everUnknown: false, inFlight: false, closedBy: 1 };
    const f = await failureOf(
      run(attemptEnv(2, 1_000, { heartbeatDetails: clean }), s.acts.createPayment, charge(s, 'h4')),
    );
    expect(f).toMatchObject({ type: ErrorType.ProviderRejected, nonRetryable: true });

    // The key's first request was another amount: the provider's 422 is an answer about this key, whatever came before.
    await run(attemptEnv(1), s.acts.createPayment, charge(s, 'h5'));
    const other = charge(s, 'h5');
    const mismatch = await failureOf(
      run(
        attemptEnv(2, 1_000, { heartbeatDetails: { everSent: true, everUnknown: true, inFlight: false } }),
        s.acts.createPayment,
        { ...other, input: { ...other.input, amount: 1_501 } },
      ),
    );
    expect(mismatch).toMatchObject({ type: ErrorType.ProviderRejected, nonRetryable: true });
    expect(mismatch.details?.[0]).toMatchObject({ status: 422, code: 'idempotency_key_mismatch' });
  });

  it('cancelled while the create is on the wire: OutcomeUnknown cancelled_after_send, and the call ends now', async () => {
    const s = await setup({ keys: false });
    sim.addFaults({ rules: [{ match: { operation: 'create' }, fault: 'latency', latency_ms: 30_000 }] });
    const env = attemptEnv(1);
    const pending = failureOf(run(env, s.acts.createPayment, charge(s, 'c1')));
    await eventually(
      'the create at the provider',
      () => sim.ledger(s.apiKey).requests.some((r) => r.operation === 'create'),
      5_000,
      20,
    );
    env.cancel('TIMED_OUT');
    const f = await pending;
    expect(f).toMatchObject({ type: ErrorType.OutcomeUnknown, nonRetryable: true });
    expect(f.details?.[0]).toMatchObject({ reason: 'cancelled_after_send', everSent: true, everUnknown: true });
  });

  it('cancelled during the look-up before a resend: the create is never sent', async () => {
    const s = await setup({ keys: false });
    sim.addFaults({ rules: [{ match: { operation: 'lookup' }, fault: 'latency', latency_ms: 30_000 }] });
    const env = chainedEnv(2, 1_000, { everSent: false, everUnknown: false, inFlight: false, sends: 0, closedBy: 1 });
    const pending = failureOf(run(env, s.acts.createPayment, charge(s, 'c2')));
    await eventually(
      'the lookup at the provider',
      () => sim.ledger(s.apiKey).requests.some((r) => r.operation === 'lookup'),
      5_000,
      20,
    );
    env.cancel('TIMED_OUT');
    const f = await pending;
    // The look-up was aborted after it left (unknown for a read), so this attempt sent nothing: NotSent, retryable.
    expect(f).toMatchObject({ type: ErrorType.NotSent, nonRetryable: false });
    expect(f.details?.[0]).toMatchObject({ reason: 'lookup_before_resend_failed', everSent: false });
    expect(((f.cause as Error).cause as { details?: unknown }).details).toMatchObject({
      reason: 'cancelled_after_send',
    });
    expect(sim.ledger(s.apiKey).requests.map((r) => r.operation)).toEqual(['lookup']);
  });

  it('a failed read after a committed refund is unknown, never a refusal of the refund', async () => {
    const s = await setup();
    const created = await run(attemptEnv(1), s.acts.createPayment, charge(s, 'r1'));
    if (created.outcome === 'declined') throw new Error('declined');
    sim.addFaults({ rules: [{ match: { operation: 'lookup' }, fault: 'status', status: 401, times: 1 }] });
    const f = await failureOf(
      run(attemptEnv(1), s.acts.refundPayment, {
        provider: 'simulator',
        merchantId: s.merchantId,
        key: 'r1-refund',
        paymentId: created.payment.id,
        amount: 500,
        amountRefundedBefore: 0,
      }),
    );
    expect(f).toMatchObject({ type: ErrorType.OutcomeUnknown, nonRetryable: false });
    expect(f.details?.[0]).toMatchObject({ reason: 'read_after_refund_failed', everSent: true });
    expect(s.effects('refund')).toHaveLength(1);
  });
});
