/**
 * Bulkheads end to end, in real time on the dev server: two configured providers, each an adapter to its own simulator.
 * `simulator` is slow (30 s on every create, cut off by a 4 s HTTP timeout and retried: every attempt holds its slot
 * until the timeout), `backup` is healthy. The real `createWorkers` gives each provider its own activity task queue and
 * worker with its own slots, so a backlog of slow payments that fills every slot of `simulator` leaves `backup`'s free:
 * payments on `backup`, named in the request and sent through the real PaymentsClient, answer well inside their submit
 * wait, and their create activity waits almost nothing between scheduled and started (history).
 */
import { randomUUID } from 'node:crypto';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import type { Worker } from '@temporalio/worker';
import pino from 'pino';
import { InMemoryCircuitBreaker } from '../../src/breaker';
import { PaymentsClient } from '../../src/client';
import { providerTaskQueue } from '../../src/domain/ids';
import { createProvider, simulatorCapabilities } from '../../src/providers';
import type { RestProvider } from '../../src/providers/rest/adapter';
import type { PaymentProvider } from '../../src/providers/types';
import { type RunningSimulator, startSimulator } from '../../src/simulator/server';
import { type Stack, startStack } from '../../src/stack';
import { eventually } from '../helpers/eventually';
import { chargeRequest, fastTimings, workflowBundle } from '../helpers/payments';
import { connectDevServer } from '../helpers/servers';
import { terminateAll } from '../helpers/terminate';

let env: TestWorkflowEnvironment;
beforeAll(async () => {
  env = await connectDevServer();
});
afterAll(async () => {
  await env?.teardown();
});

const logger = pino({ level: process.env.TEST_LOG_LEVEL ?? 'silent' });
const SLOW_SLOTS = 2; // `simulator`'s own limit (PROVIDER_SIMULATOR_MAX_CONCURRENCY)
const DEFAULT_SLOTS = 5; // every other provider's (the worker-wide default)
const SLOW_PAYMENTS = 12; // more than all slots of both providers together: a backlog whatever the queues
const HTTP_TIMEOUT_MS = 4_000;
const SUBMIT_WAIT_MS = 8_000;

/** Counts the creates in flight through `provider`, and the most ever in flight at once. */
function inFlight(provider: PaymentProvider) {
  const counts = { now: 0, max: 0 };
  const wrapped: PaymentProvider = new Proxy(provider, {
    get(target, prop) {
      const value: unknown = Reflect.get(target, prop, target);
      if (typeof value !== 'function') return value;
      if (prop !== 'createPayment') return value.bind(target);
      return async (...args: Parameters<PaymentProvider['createPayment']>) => {
        counts.now += 1;
        counts.max = Math.max(counts.max, counts.now);
        try {
          return await target.createPayment(...args);
        } finally {
          counts.now -= 1;
        }
      };
    },
  });
  return { provider: wrapped, counts };
}

/**
 * Milliseconds between the createPayment activity's scheduled and started events, and its attempt; `local` when the
 * create was settled by shape 3's local first attempt on the workflow worker (a marker, no activity on any queue).
 */
async function createScheduleToStart(workflowId: string): Promise<{ ms: number; attempt: number } | 'local'> {
  const events = (await env.client.workflow.getHandle(workflowId).fetchHistory()).events ?? [];
  const local = events.some((e) => e.markerRecordedEventAttributes?.markerName === 'core_local_activity');
  const queued = events.some((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'createPayment');
  if (local && !queued) return 'local';
  const ms = (t: { seconds?: unknown; nanos?: number | null } | null | undefined) =>
    Number(t?.seconds ?? 0) * 1_000 + Math.floor((t?.nanos ?? 0) / 1e6);
  const scheduled = events.find((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'createPayment');
  const started = events.find(
    (e) => Number(e.activityTaskStartedEventAttributes?.scheduledEventId ?? -1) === Number(scheduled?.eventId ?? -2),
  );
  if (!scheduled || !started) throw new Error(`no started createPayment in ${workflowId}`);
  return {
    ms: ms(started.eventTime) - ms(scheduled.eventTime),
    attempt: started.activityTaskStartedEventAttributes?.attempt ?? 0,
  };
}

it('a slow provider whose slots are all taken does not delay payments on a second provider (bulkhead)', async () => {
  const sims: RunningSimulator[] = [];
  const providers: RestProvider[] = [];
  let slowAnswers: Promise<unknown>[] = [];
  const workflowIds: string[] = [];
  let stack: Stack | undefined;
  try {
    const apiKey = `sk_test_${randomUUID()}`;
    const [slowSim, fastSim] = await Promise.all([startSimulator({ port: 0 }), startSimulator({ port: 0 })]);
    sims.push(slowSim, fastSim);
    for (const sim of sims) await sim.setMerchant(apiKey, { idempotency: true, key_ttl_s: 86_400 });
    slowSim.addFaults({ rules: [{ match: { operation: 'create' }, fault: 'latency', latency_ms: 30_000 }] });
    const adapter = (name: string, sim: RunningSimulator) => {
      const p = createProvider({
        name,
        baseUrl: sim.url,
        apiKey,
        capabilities: simulatorCapabilities(86_400),
        connectTimeoutMs: 1_000,
        totalTimeoutMs: HTTP_TIMEOUT_MS,
        logger,
      });
      providers.push(p);
      return p;
    };
    const slow = inFlight(adapter('simulator', slowSim));
    const taskQueue = `bulkhead-${randomUUID()}`;
    stack = await startStack({
      logger,
      namespace: env.namespace ?? 'default',
      taskQueue,
      nativeConnection: env.nativeConnection,
      workers: {
        providers: { simulator: slow.provider, backup: adapter('backup', fastSim) },
        workflows: { workflowBundle: await workflowBundle() },
        // A slow provider that never trips the breaker (its timeouts are not counted) keeps every slot it is given:
        // the case a bulkhead is for.
        breaker: new InMemoryCircuitBreaker({ failureThreshold: 1_000_000 }),
        maxConcurrentActivityTaskExecutions: DEFAULT_SLOTS,
        providerLimits: { simulator: { maxConcurrency: SLOW_SLOTS } },
        // The workers' presets (shape 3 runs with the worker's): one attempt may take the whole HTTP timeout.
        retry: {
          create: { attemptTimeoutMs: 10_000, budgetMs: 120_000, initialIntervalMs: 100, maximumIntervalMs: 500 },
        },
        start: false,
      },
    });
    const workers = await stack.createWorkers();
    const slots = (w: Worker) =>
      (w.options.tuner.activityTaskSlotSupplier as { type: string; numSlots?: number }).numSlots;
    const activityWorkers = workers.slice(1).map((w) => [w.options.taskQueue, slots(w)]);
    await stack.startWorkers();

    const payments = new PaymentsClient(env.client, {
      taskQueue,
      timings: { ...fastTimings, submitWaitMs: SUBMIT_WAIT_MS },
      providers: ['simulator', 'backup'],
      orderSingleFlight: false,
    });
    const merchantId = `m_${randomUUID().slice(0, 8)}`;
    const charge = (provider: string) => {
      const key = `key_${randomUUID()}`;
      workflowIds.push(`charge:${merchantId}:${key}`);
      return payments.charge(merchantId, key, { ...chargeRequest(), provider });
    };

    // The slow provider's backlog: its answers come after the submit wait (pending); nobody waits for them here.
    slowAnswers = Array.from({ length: SLOW_PAYMENTS }, () => charge('simulator'));
    await eventually('the slow provider had all its slots busy', () => slow.counts.now >= SLOW_SLOTS, 15_000, 20);

    const fast: { status: string; ms: number; inFlightAtAnswer: number }[] = [];
    for (let i = 0; i < 4; i++) {
      const t0 = Date.now();
      const { view } = await charge('backup');
      fast.push({ status: view.status, ms: Date.now() - t0, inFlightAtAnswer: slow.counts.now });
    }
    // The claim: answered by the provider (a 200), well inside the submit wait, taken up at once by their own worker.
    expect(fast.map((f) => f.status)).toEqual(['succeeded', 'succeeded', 'succeeded', 'succeeded']);
    for (const f of fast) expect(f.ms).toBeLessThan(SUBMIT_WAIT_MS / 4);
    const waits = await Promise.all(workflowIds.slice(SLOW_PAYMENTS).map(createScheduleToStart));
    for (const w of waits) {
      if (w === 'local') continue; // answered by the local first attempt: no queue to wait on
      expect(w).toEqual({ ms: expect.any(Number), attempt: 1 });
      expect(w.ms).toBeLessThan(1_000);
    }
    // The slow provider has its own limits, so its creates never ran locally (a local attempt would bypass its slots).
    const slowQueues = (
      (await env.client.workflow.getHandle(workflowIds[0] ?? '').fetchHistory()).events ?? []
    ).flatMap((e) => e.activityTaskScheduledEventAttributes?.taskQueue?.name ?? []);
    expect(slowQueues[0]).toBe(providerTaskQueue(taskQueue, 'simulator'));
    // ...while the slow provider had every one of its slots busy, and never more.
    expect(fast.map((f) => f.inFlightAtAnswer)).toEqual([SLOW_SLOTS, SLOW_SLOTS, SLOW_SLOTS, SLOW_SLOTS]);
    expect(slow.counts.max).toBe(SLOW_SLOTS);
    // How: one workflow worker, then one activity worker per provider queue, each with its own slots.
    expect(activityWorkers).toEqual([
      [providerTaskQueue(taskQueue, 'simulator'), SLOW_SLOTS],
      [providerTaskQueue(taskQueue, 'backup'), DEFAULT_SLOTS],
    ]);
    expect(fastSim.ledger(apiKey).effects.filter((e) => e.operation === 'create')).toHaveLength(4);
    expect(slowSim.ledger(apiKey).effects).toHaveLength(0);
    console.info(
      `bulkhead: backup answers ${fast.map((f) => f.ms).join(', ')} ms (submit wait ${SUBMIT_WAIT_MS}); schedule-to-start ${waits.map((w) => (w === 'local' ? 'local' : w.ms)).join(', ')} ms; simulator ${slow.counts.now}/${SLOW_SLOTS} slots busy (most ever ${slow.counts.max}) with ${SLOW_PAYMENTS} payments on it`,
    );
  } finally {
    await terminateAll(env.client, workflowIds);
    await Promise.allSettled(slowAnswers); // their updates end with their workflows
    // Drained while the simulators close: the slow provider's creates in flight end at once.
    const draining = stack?.close();
    await Promise.all(sims.map((s) => s.close()));
    await draining;
    await Promise.all(providers.map((p) => p.close()));
  }
});
