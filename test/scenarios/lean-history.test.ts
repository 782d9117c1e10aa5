/**
 * The lean history shape of a payment started through the API (the early answer under the client's own deadline,
 * search attributes in the start request, one upsert per status change, webhooks that tell nothing new answered from a
 * query), with its first create attempt as a local activity that also answers the worker's view of the provider
 * (shape 3): a clean automatic-capture charge costs five Temporal actions and 14 history events for its whole life, the
 * update is answered in the first workflow task, and neither capabilities nor retry presets travel in its input: the
 * worker's own (recorded in the local activity's marker) drive every later activity, and a worker whose adapter
 * differs from the recorded view refuses before anything is sent.
 */
import { randomUUID } from 'node:crypto';
import { type Payload, defaultPayloadConverter } from '@temporalio/common';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { temporal } from '@temporalio/proto';
import { Worker } from '@temporalio/worker';
import pino from 'pino';
import { createActivities } from '../../src/activities';
import { PaymentsClient } from '../../src/client';
import { captureWorkflowId, chargeWorkflowId, providerTaskQueue } from '../../src/domain/ids';
import { ChargeRequest, type PaymentView } from '../../src/domain/payment';
import type { RetryOverrides } from '../../src/domain/retry';
import type { ChargeWorkflowInput } from '../../src/domain/workflow-inputs';
import { createProvider, simulatorCapabilities } from '../../src/providers';
import { workflowBundle } from '../helpers/payments';
import { connectDevServer } from '../helpers/servers';
import { recordHistories } from '../helpers/workflows';
import {
  type ApiWorld,
  WEBHOOK_SECRET,
  chargeBody,
  newKey,
  startWorld,
  testRetry,
  testTimings,
} from '../helpers/world';

const EventType = temporal.api.enums.v1.EventType;

let env: TestWorkflowEnvironment;
let h: ApiWorld;

beforeAll(async () => {
  env = await connectDevServer();
  // A short refund window so the payment's whole life fits in the test.
  h = await startWorld(env, { api: true, timings: { refundWindowMs: 3_000 } });
  // The provider's webhook is held until the test releases it after the answer: a webhook that overtakes the
  // workflow's own record of the success does tell it something (and is rightly signalled); this test is about one
  // that tells nothing new. Seen once in three runs on a loaded machine: the unheld webhook won that race and was signalled.
  await h.sim.setMerchant(h.apiKey, {
    idempotency: true,
    webhook_url: `${h.url}/webhooks/simulator`,
    webhook_secret: WEBHOOK_SECRET,
    webhook_delay_ms: 60_000,
  });
});
afterAll(async () => {
  await h?.close();
  await env?.teardown();
});

it('a clean charge: start, submit, one local provider call, one upsert, the refund-window timer; 14 events; the webhook costs nothing', async () => {
  const key = newKey();
  const body = chargeBody();
  const answer = await h.request('POST', '/v1/payments', { key, body });
  expect(answer.status).toBe(200);
  expect(answer.body).toMatchObject({ status: 'succeeded' });
  await h.sim.flushWebhooks(); // releases the held webhook
  // The simulator's webhook for this (the file's first) payment reached the API and was acknowledged.
  const deliveries = h.sim.webhookDeliveries();
  expect(deliveries.map((d) => [d.type, d.status])).toEqual([['payment.succeeded', 200]]);

  const workflowId = chargeWorkflowId(h.a.id, key);
  const handle = env.client.workflow.getHandle(workflowId);
  const final = (await handle.result()) as PaymentView; // closes after the 3 s refund window
  expect(final.status).toBe('succeeded');
  const events = (await handle.fetchHistory()).events ?? [];
  const count = (type: number) => events.filter((e) => e.eventType === type).length;
  expect(count(EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED)).toBe(0); // the webhook was answered from a query
  const actions = {
    start: 1,
    updates: count(EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED),
    localActivities: count(EventType.EVENT_TYPE_MARKER_RECORDED), // the local first attempt; no patch marker
    activities: count(EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED),
    timers: count(EventType.EVENT_TYPE_TIMER_STARTED),
    upserts: count(EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES),
    children: count(EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED),
  };
  expect(actions).toEqual({
    start: 1,
    updates: 1,
    localActivities: 1,
    activities: 0,
    timers: 1,
    upserts: 1,
    children: 0,
  });
  // 14 for the whole life: started; the first workflow task (3) accepts the update, records the local attempt's
  // marker, completes the update, upserts the status and starts the refund-window timer; the timer fires; the last
  // workflow task (3) completes. The update was answered in the first workflow task.
  const E = EventType;
  const names = events.map((e) => E[e.eventType ?? 0]);
  const firstTask = [
    E.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED,
    E.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED,
    E.EVENT_TYPE_WORKFLOW_TASK_STARTED,
    E.EVENT_TYPE_WORKFLOW_TASK_COMPLETED,
  ];
  // What the first workflow task's completion recorded (the SDK orders its commands and messages).
  const firstTaskCommands = [
    E.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED,
    E.EVENT_TYPE_MARKER_RECORDED,
    E.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED,
    E.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES,
    E.EVENT_TYPE_TIMER_STARTED,
  ];
  const afterwards = [
    E.EVENT_TYPE_TIMER_FIRED,
    E.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED,
    E.EVENT_TYPE_WORKFLOW_TASK_STARTED,
    E.EVENT_TYPE_WORKFLOW_TASK_COMPLETED,
    E.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED,
  ];
  expect(names.slice(0, 4)).toEqual(firstTask.map((t) => E[t]));
  expect([...names.slice(4, 9)].sort()).toEqual(firstTaskCommands.map((t) => E[t]).sort());
  expect(names.slice(9)).toEqual(afterwards.map((t) => E[t]));
  expect(events.length).toBeLessThanOrEqual(18);
  // One create effect at the provider for this payment.
  expect(h.ledger().effects.filter((e) => e.operation === 'create' && e.reference === body.orderId)).toHaveLength(1);
  // Visibility shows the settled status (set at start as pending, upserted once).
  const described = await handle.describe();
  expect(described.searchAttributes.PaymentStatus).toEqual(['succeeded']);
  // The API sent neither the provider's capabilities nor retry presets: the worker's came with the local attempt.
  const input = startInput(events);
  expect(input.shape).toBe(3);
  expect(input).not.toHaveProperty('capabilities');
  expect(input).not.toHaveProperty('retry');
  // Shape 2's recording (lean-charge-succeeded) stays as it was: it is what replay checks shape 2 against.
  await recordHistories({ env }, 'local-first-charge-succeeded', [workflowId]);
});

/** The first argument the charge workflow was started with. */
const startInput = (events: temporal.api.history.v1.IHistoryEvent[]): ChargeWorkflowInput =>
  defaultPayloadConverter.fromPayload<ChargeWorkflowInput>(
    events[0]?.workflowExecutionStartedEventAttributes?.input?.payloads?.[0] as Payload,
  );

/** The timeouts and retry policy of each activity `activityType` a workflow scheduled, in milliseconds. */
const scheduledPolicies = async (workflowId: string, activityType: string) => {
  const events = (await env.client.workflow.getHandle(workflowId).fetchHistory()).events ?? [];
  const ms = (d: { seconds?: unknown; nanos?: number | null } | null | undefined) =>
    d === null || d === undefined ? undefined : Number(d.seconds ?? 0) * 1000 + Math.round((d.nanos ?? 0) / 1e6);
  return events
    .map((e) => e.activityTaskScheduledEventAttributes)
    .filter((a) => a?.activityType?.name === activityType)
    .map((a) => ({
      startToCloseMs: ms(a?.startToCloseTimeout),
      scheduleToCloseMs: ms(a?.scheduleToCloseTimeout),
      initialIntervalMs: ms(a?.retryPolicy?.initialInterval),
      maximumIntervalMs: ms(a?.retryPolicy?.maximumInterval),
      maximumAttempts: a?.retryPolicy?.maximumAttempts,
    }));
};

describe('the worker owns the provider configuration and the retry presets', () => {
  /** The workers' presets: every value differs from the production presets and from the world's `testRetry`. */
  const workerRetry: RetryOverrides = {
    create: {
      initialIntervalMs: 300,
      maximumIntervalMs: 900,
      attemptTimeoutMs: 3_000,
      budgetMs: 9_000,
      maximumAttempts: 3,
    },
    capture: {
      initialIntervalMs: 400,
      maximumIntervalMs: 800,
      attemptTimeoutMs: 4_000,
      budgetMs: 8_000,
      maximumAttempts: 4,
    },
  };
  let w: ApiWorld;
  beforeAll(async () => {
    // A provider with limits of its own: the local activity answers the worker's view only, and the create (and the
    // capture) are regular activities whose scheduled policies show which presets the payment runs with.
    w = await startWorld(env, {
      api: true,
      retry: workerRetry,
      providerLimits: { simulator: { maxConcurrency: 10 } },
      webhooks: false,
      timings: { refundWindowMs: 3_000 },
    });
  }, 120_000);
  afterAll(async () => {
    await w?.close();
  });

  it('a provider with limits of its own: one local activity for the worker view, the create on its queue; 6 actions, 20 events', async () => {
    const key = newKey();
    const body = chargeBody();
    const answer = await w.request('POST', '/v1/payments', { key, body });
    expect(answer.status).toBe(200);
    expect(answer.body).toMatchObject({ status: 'succeeded' });
    const handle = env.client.workflow.getHandle(chargeWorkflowId(w.a.id, key));
    expect(((await handle.result()) as PaymentView).status).toBe('succeeded'); // closes after the 3 s refund window
    const events = (await handle.fetchHistory()).events ?? [];
    const count = (type: number) => events.filter((e) => e.eventType === type).length;
    expect({
      start: 1,
      updates: count(EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED),
      localActivities: count(EventType.EVENT_TYPE_MARKER_RECORDED),
      activities: count(EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED),
      timers: count(EventType.EVENT_TYPE_TIMER_STARTED),
      upserts: count(EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES),
      signals: count(EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED),
      children: count(EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED),
    }).toEqual({
      start: 1,
      updates: 1,
      localActivities: 1,
      activities: 1,
      timers: 1,
      upserts: 1,
      signals: 0,
      children: 0,
    });
    // Shape 2's 19 and one marker: started, 3 workflow tasks (9), update accepted/completed, the marker, the activity
    // scheduled/started/completed, one upsert, the refund-window timer started/fired, completed.
    expect(events).toHaveLength(20);
    expect(w.ledger().effects.filter((e) => e.reference === body.orderId)).toHaveLength(1);
  });

  it("a PaymentsClient with provider names only (no capabilities, no retry): its payment's input carries neither, the create and the capture run with the workers' presets", async () => {
    // Everything the client is given: where to start payments, their delays, the provider names. Nothing else.
    const payments = new PaymentsClient(env.client, {
      taskQueue: w.taskQueue,
      timings: { ...testTimings, refundWindowMs: 3_000 },
      providers: ['simulator'],
    });
    const key = newKey();
    const body = chargeBody({ capture: 'manual' });
    const charged = await payments.charge(w.a.id, key, body);
    expect(charged).toMatchObject({ replayed: false, view: { status: 'authorized' } });
    const captureKey = newKey();
    const capture = await payments.capture(w.a.id, key, captureKey, {});
    expect(capture).toMatchObject({ completed: true, view: { status: 'succeeded', amountCaptured: 1_000 } });

    const workflowId = chargeWorkflowId(w.a.id, key);
    const events = (await env.client.workflow.getHandle(workflowId).fetchHistory()).events ?? [];
    const input = startInput(events);
    expect(input.shape).toBe(3);
    expect(input).not.toHaveProperty('capabilities');
    expect(input).not.toHaveProperty('retry');
    // One local activity (the worker's view, no create at a provider with limits), then the create on its queue.
    // (The capture's own patch marker, `operation-total-before`, is not a local activity.)
    const localActivityMarkers = events.filter(
      (e) => e.markerRecordedEventAttributes?.markerName === 'core_local_activity',
    );
    expect(localActivityMarkers).toHaveLength(1);
    const queues = events.flatMap((e) => e.activityTaskScheduledEventAttributes?.taskQueue?.name ?? []);
    expect(queues).toEqual([providerTaskQueue(w.taskQueue, 'simulator')]);
    expect(await scheduledPolicies(workflowId, 'createPayment')).toEqual([
      {
        startToCloseMs: 3_000,
        scheduleToCloseMs: 9_000,
        initialIntervalMs: 300,
        maximumIntervalMs: 900,
        maximumAttempts: 3,
      },
    ]);
    // The capture child got the worker's presets from the payment (its input): the recorded ones, not the defaults.
    expect(await scheduledPolicies(captureWorkflowId(w.a.id, captureKey), 'capturePayment')).toEqual([
      {
        startToCloseMs: 4_000,
        scheduleToCloseMs: 8_000,
        initialIntervalMs: 400,
        maximumIntervalMs: 800,
        maximumAttempts: 4,
      },
    ]);
    expect(
      w
        .ledger()
        .effects.filter((e) => e.reference === body.orderId)
        .map((e) => e.operation),
    ).toEqual(['create', 'capture']);
  });
});

it("a shape-2 payment started by an older API keeps its shape: capabilities and the starter's presets from its input", async () => {
  // What the API wrote before shape 3: the provider's capabilities and its own retry presets in the input.
  const starterRetry: RetryOverrides = {
    create: {
      initialIntervalMs: 250,
      maximumIntervalMs: 750,
      attemptTimeoutMs: 3_500,
      budgetMs: 7_000,
      maximumAttempts: 2,
    },
  };
  const key = newKey();
  const workflowId = chargeWorkflowId(h.a.id, key);
  const input: ChargeWorkflowInput = {
    merchantId: h.a.id,
    key,
    fingerprint: 'a'.repeat(64),
    request: ChargeRequest.parse(chargeBody()),
    timings: { ...testTimings, refundWindowMs: 1_000 },
    retry: starterRetry,
    capabilities: simulatorCapabilities(),
    shape: 2,
  };
  const handle = await env.client.workflow.start('chargeWorkflow', {
    taskQueue: h.taskQueue,
    workflowId,
    args: [input],
  });
  expect(((await handle.result()) as PaymentView).status).toBe('succeeded');
  const events = (await handle.fetchHistory()).events ?? [];
  // No local activity in shape 2: the create is a regular activity with the starter's presets, not the worker's.
  expect(events.filter((e) => e.eventType === EventType.EVENT_TYPE_MARKER_RECORDED)).toHaveLength(0);
  expect(await scheduledPolicies(workflowId, 'createPayment')).toEqual([
    {
      startToCloseMs: 3_500,
      scheduleToCloseMs: 7_000,
      initialIntervalMs: 250,
      maximumIntervalMs: 750,
      maximumAttempts: 2,
    },
  ]);
  expect(h.ledger().effects.filter((e) => e.reference === input.request.orderId)).toHaveLength(1);
});

it('a worker whose adapter differs from the view the payment recorded refuses before sending: failed, no request', async () => {
  // Two worker processes configured differently (a rolling deploy): the workflow's worker answers the local activity
  // with its adapter's capabilities (a provider with limits: the create goes to the provider's queue), and the worker
  // polling that queue has an adapter whose key lifetime differs. It must refuse, not send with the wrong safety.
  const logger = pino({ level: process.env.TEST_LOG_LEVEL ?? 'silent' });
  const adapter = (keyTtlSeconds: number) =>
    createProvider(
      {
        name: 'simulator',
        baseUrl: h.sim.url,
        apiKey: h.apiKey,
        capabilities: simulatorCapabilities(keyTtlSeconds),
        connectTimeoutMs: 500,
        totalTimeoutMs: 1_500,
      },
      logger,
    );
  const recorded = adapter(86_400);
  const other = adapter(60);
  const taskQueue = `mismatch-${randomUUID()}`;
  const workflowWorker = await Worker.create({
    connection: env.nativeConnection,
    namespace: env.namespace ?? 'default',
    taskQueue,
    workflowBundle: await workflowBundle(),
    activities: createActivities({
      providers: { simulator: recorded },
      logger,
      retry: testRetry,
      providersWithLimits: ['simulator'],
    }),
  });
  const providerWorker = await Worker.create({
    connection: env.nativeConnection,
    namespace: env.namespace ?? 'default',
    taskQueue: providerTaskQueue(taskQueue, 'simulator'),
    activities: createActivities({ providers: { simulator: other }, logger, retry: testRetry }),
  });
  const payments = new PaymentsClient(env.client, {
    taskQueue,
    timings: testTimings,
    providers: ['simulator'],
  });
  const key = newKey();
  const body = chargeBody();
  try {
    await workflowWorker.runUntil(
      providerWorker.runUntil(async () => {
        const { view } = await payments.charge(h.a.id, key, body);
        expect(view.key).toBe(key);
        const final = (await env.client.workflow.getHandle(chargeWorkflowId(h.a.id, key)).result()) as PaymentView;
        expect(final.status).toBe('failed');
      }),
    );
  } finally {
    await Promise.all([recorded.close(), other.close()]);
  }
  const events = (await env.client.workflow.getHandle(chargeWorkflowId(h.a.id, key)).fetchHistory()).events ?? [];
  const failed = events.flatMap((e) => e.activityTaskFailedEventAttributes?.failure ?? []);
  expect(failed.map((f) => f.applicationFailureInfo?.type)).toEqual(['ValidationError']);
  expect(failed[0]?.message).toMatch(/differ from this worker's/);
  expect(h.ledger().requests.filter((r) => r.reference === body.orderId)).toHaveLength(0);
});
