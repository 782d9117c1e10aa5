/**
 * "A 30 s latency on one provider does not delay payments on the other" (issue 12 acceptance), through the whole stack:
 * the real HTTP API, PaymentsClient and workflows on the run's dev server, and the real `createWorkers`, which gives
 * each provider its own activity task queue and worker with its own slots (the bulkhead). Two providers at once, each
 * a real simulator over HTTP: `slow` answers every call after 30 s (the simulator's `latency` fault on every request,
 * before anything is committed; its adapter's timeouts are longer, so each call really holds its slot for 30 s), and
 * `simulator` is healthy.
 *
 * More payments go to `slow` than both providers have slots together, so whatever the slots, its queue has a backlog
 * and its slots are all busy. Then payments on `simulator` must answer 200 `succeeded` while every call to `slow` is
 * still in flight and none has finished: they were not queued behind the slow ones. The claim is ordering, not a
 * latency number: each fast answer is checked against the slow provider's counters at the moment it arrived.
 *
 * Seen failing without the bulkhead: with `providerTaskQueue` answering one queue for every provider and
 * `createWorkers` building one activity worker on it with the slots of both together (2 + 4), the slow payments take
 * every slot, the fast payments wait for one that frees only after 30 s, and the API answers them 202 `pending`.
 */
import { randomUUID } from 'node:crypto';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import pino from 'pino';
import { chargeWorkflowId, providerTaskQueue } from '../../src/domain/ids';
import { createProvider, simulatorCapabilities } from '../../src/providers';
import type { PaymentProvider } from '../../src/providers/types';
import { type RunningSimulator, startSimulator } from '../../src/simulator/server';
import {
  type ApiWorld,
  type ApiResponse,
  type ApiWorldOptions,
  chargeBody,
  newKey,
  startWorld,
} from '../helpers/world';
import { connectDevServer } from '../helpers/servers';
import { eventually } from '../helpers/eventually';
import { terminateAll } from '../helpers/terminate';

const LATENCY_MS = 30_000;
const SLOW_SLOTS = 2; // `slow`'s own activity slots (PROVIDER_SLOW_MAX_CONCURRENCY)
const DEFAULT_SLOTS = 4; // every other provider's
const SLOW_PAYMENTS = SLOW_SLOTS + DEFAULT_SLOTS + 2; // a backlog even if the two pools were one
const FAST_PAYMENTS = 4;

/** Counts the calls in flight through `provider`, the most ever at once, and the calls that have finished. */
function counted(provider: PaymentProvider) {
  const counts = { now: 0, max: 0, finished: 0 };
  const wrapped: PaymentProvider = new Proxy(provider, {
    get(target, prop) {
      const value: unknown = Reflect.get(target, prop, target);
      if (typeof value !== 'function') return value;
      if (prop === 'close') return value.bind(target);
      return async (...args: unknown[]) => {
        counts.now += 1;
        counts.max = Math.max(counts.max, counts.now);
        try {
          return await (value as (...a: unknown[]) => Promise<unknown>).apply(target, args);
        } finally {
          counts.now -= 1;
          counts.finished += 1;
        }
      };
    },
  });
  return { provider: wrapped, counts };
}

let env: TestWorkflowEnvironment;
beforeAll(async () => {
  env = await connectDevServer();
});
afterAll(async () => {
  await env?.teardown();
});

/** A world with a second provider, `slow`: a simulator that answers every call after LATENCY_MS. */
interface SlowWorld {
  readonly h: ApiWorld;
  readonly slow: ReturnType<typeof counted>;
  readonly slowSim: RunningSimulator;
  readonly apiKey: string;
  /** Starts a payment on `provider`; its workflow is terminated and its answer awaited at the end. */
  pay(provider: string): { key: string; answer: Promise<ApiResponse> };
}

/**
 * Runs `test` against a {@link SlowWorld} (with `providerLimits`, if given, for the workers), then tears it down
 * without waiting out the latency: the payments are ended, the slow simulator stopped (it cancels its latency and
 * closes the connections, so the calls in flight fail at once), then the workers and the API.
 */
async function withSlowProvider(
  providerLimits: ApiWorldOptions['providerLimits'] | undefined,
  test: (world: SlowWorld) => Promise<void>,
): Promise<void> {
  const logger = pino({ level: process.env.TEST_LOG_LEVEL ?? 'silent' });
  const apiKey = `sk_test_${randomUUID()}`;
  const slowSim: RunningSimulator = await startSimulator({ port: 0 });
  const adapter = createProvider(
    {
      name: 'slow',
      baseUrl: slowSim.url,
      apiKey,
      capabilities: simulatorCapabilities(),
      connectTimeoutMs: 1_000,
      // Longer than the latency: every call holds its slot for the whole 30 s instead of timing out early.
      totalTimeoutMs: LATENCY_MS + 10_000,
    },
    logger,
  );
  const slow = counted(adapter);
  let h: ApiWorld | undefined;
  const workflowIds: string[] = [];
  const answers: Promise<ApiResponse>[] = [];
  try {
    await slowSim.setMerchant(apiKey, { idempotency: true });
    slowSim.addFaults({ rules: [{ match: {}, fault: 'latency', latency_ms: LATENCY_MS }] });
    h = await startWorld(env, {
      api: true,
      extraProviders: { slow: slow.provider },
      ...(providerLimits === undefined ? {} : { providerLimits }),
      maxConcurrentActivityTaskExecutions: DEFAULT_SLOTS,
      // One attempt may take the whole latency; the create's budget outlasts the test.
      retry: {
        create: {
          attemptTimeoutMs: LATENCY_MS + 15_000,
          budgetMs: 120_000,
          initialIntervalMs: 200,
          maximumIntervalMs: 500,
        },
      },
      orderSingleFlight: false,
    });
    const harness = h;
    const pay = (provider: string) => {
      const key = newKey();
      workflowIds.push(chargeWorkflowId(harness.a.id, key));
      const answer = harness.request('POST', '/v1/payments', { key, body: chargeBody({ provider }) });
      answers.push(answer);
      return { key, answer };
    };
    await test({ h: harness, slow, slowSim, apiKey, pay });
  } finally {
    await terminateAll(env.client, workflowIds);
    await Promise.allSettled(answers);
    await slowSim.close();
    await h?.close();
    await adapter.close();
  }
}

it('a 30 s latency on every call to one provider does not delay payments on the other (own queue, own slots)', async () => {
  const t0 = Date.now();
  await withSlowProvider({ slow: { maxConcurrency: SLOW_SLOTS } }, async ({ h, slow, slowSim, apiKey, pay }) => {
    // The slow provider's backlog: nobody waits for these answers yet.
    const slowPayments = Array.from({ length: SLOW_PAYMENTS }, () => pay('slow'));
    await eventually('every slot of the slow provider to be busy', () => slow.counts.now >= SLOW_SLOTS, 20_000, 20);

    // Payments on the other provider, all at once, each answer stamped with where the slow provider stood.
    const fast = await Promise.all(
      Array.from({ length: FAST_PAYMENTS }, async () => {
        const p = pay('simulator');
        const res = await p.answer;
        return {
          key: p.key,
          http: res.status,
          status: res.body.status,
          slowInFlight: slow.counts.now,
          slowFinished: slow.counts.finished,
        };
      }),
    );
    // The slow payments' own answers: 202 pending after the submit wait, still waiting on their provider.
    const slowAnswered = await Promise.all(slowPayments.map((p) => p.answer));
    const stillSlow = { inFlight: slow.counts.now, finished: slow.counts.finished, effects: slowSim.ledger(apiKey) };
    const elapsedMs = Date.now() - t0;

    // The claim: every fast payment succeeded (a 200 is the provider's confirmation), and each answer arrived while the
    // slow provider had all its slots busy and not one of its calls had finished.
    expect(fast.map((f) => [f.http, f.status])).toEqual(
      Array.from({ length: FAST_PAYMENTS }, () => [200, 'succeeded']),
    );
    expect(fast.map((f) => f.slowFinished)).toEqual(Array.from({ length: FAST_PAYMENTS }, () => 0));
    expect(fast.map((f) => f.slowInFlight)).toEqual(Array.from({ length: FAST_PAYMENTS }, () => SLOW_SLOTS));
    // ...and the slow ones were still moving: 202 pending, nothing committed at the slow provider.
    expect(slowAnswered.map((r) => [r.status, r.body.status])).toEqual(
      Array.from({ length: SLOW_PAYMENTS }, () => [202, 'pending']),
    );
    expect(stillSlow).toMatchObject({ inFlight: SLOW_SLOTS, finished: 0 });
    expect(stillSlow.effects.effects).toEqual([]);
    // The bulkhead held: the slow provider never had more calls at once than its own slots.
    expect(slow.counts.max).toBe(SLOW_SLOTS);
    const fastCreates = (await h.ledger()).effects.filter((e) => e.operation === 'create');
    expect(fastCreates).toHaveLength(FAST_PAYMENTS);
    // Each provider's calls on its own activity task queue.
    const queueOf = async (key: string) =>
      ((await env.client.workflow.getHandle(chargeWorkflowId(h.a.id, key)).fetchHistory()).events ?? []).flatMap(
        (e) => e.activityTaskScheduledEventAttributes?.taskQueue?.name ?? [],
      );
    // The healthy provider's create ran as shape 3's local first attempt on the workflow worker (no queue) or on its
    // own queue; the slow provider (it has its own limits) gets no local attempt, so its creates stay on its queue.
    expect([[], [providerTaskQueue(h.taskQueue, 'simulator')]]).toContainEqual(await queueOf(fast[0]?.key ?? ''));
    expect(await queueOf(slowPayments[0]?.key ?? '')).toEqual([providerTaskQueue(h.taskQueue, 'slow')]);
    console.info(
      `provider isolation: ${FAST_PAYMENTS} payments on the healthy provider succeeded while ${SLOW_SLOTS}/${SLOW_SLOTS} slots of the slow one were busy (${SLOW_PAYMENTS} payments on it, none finished); ${elapsedMs} ms from start`,
    );
  });
}, 60_000);

it('a provider without limits of its own: its first attempts run locally, bounded, and still delay nothing on the other', async () => {
  // Shape 3 runs a charge's first create attempt as a local activity on the workflow worker when the provider has no
  // limits of its own; the attempt is cut off at its bound (3 s) and the create goes on on the provider's queue. So the
  // slow provider's payments hold local-activity slots of the workflow worker for up to 3 s each, then slots of their
  // own queue, and the healthy provider's payments must still answer 200 at once. What would fail it: anything the two
  // providers share on the way (local-activity slots run out, one HTTP pool, one breaker, a blocked event loop) making
  // the fast payments wait for the slow ones (they would answer 202 pending). Not seen failing: with the SDK's default
  // local-activity slots these 8 slow payments cannot exhaust them; the limited-provider test above is the bulkhead's.
  await withSlowProvider(undefined, async ({ h, slow, slowSim, apiKey, pay }) => {
    const slowAnswers = Array.from({ length: SLOW_PAYMENTS }, () => pay('slow').answer);
    await eventually(
      'every slow payment to have its first attempt in flight',
      () => slow.counts.now >= SLOW_PAYMENTS,
      20_000,
      20,
    );
    const fast = await Promise.all(
      Array.from({ length: FAST_PAYMENTS }, async () => {
        const res = await pay('simulator').answer;
        return { http: res.status, status: res.body.status, slowInFlight: slow.counts.now };
      }),
    );
    const slowAnswered = await Promise.all(slowAnswers);
    expect(fast.map((f) => [f.http, f.status])).toEqual(
      Array.from({ length: FAST_PAYMENTS }, () => [200, 'succeeded']),
    );
    // Each fast answer came while the slow provider still had calls in flight (local or on its queue).
    for (const f of fast) expect(f.slowInFlight).toBeGreaterThan(0);
    expect(slowAnswered.map((r) => [r.status, r.body.status])).toEqual(
      Array.from({ length: SLOW_PAYMENTS }, () => [202, 'pending']),
    );
    // Nothing committed at the slow provider, and the healthy one charged each payment once.
    expect(slowSim.ledger(apiKey).effects).toEqual([]);
    expect((await h.ledger()).effects.filter((e) => e.operation === 'create')).toHaveLength(FAST_PAYMENTS);
  });
}, 60_000);
