/**
 * The mechanism behind the 17 stuck charges of soak-update-order.test.ts, reproduced live on the dev server with the
 * real chargeWorkflow (see docs/sdk-update-ordering.md):
 *
 * 1. the charge's first workflow task ran on worker A, which is then SIGKILLed while createPayment is in flight (the
 *    server keeps the workflow sticky to A's queue: a killed worker never says it is gone);
 * 2. a query (the lean submit's fallback `handle.query(paymentQuery)`, or GET /v1/payments/:id) arrives while no
 *    workflow task is pending, so the server dispatches it directly: first to A's sticky queue, where it waits A's
 *    sticky schedule-to-start timeout (the SDK's 10 s; STICKY_TIMEOUT_MS here), then, stickiness reset, to the normal
 *    queue;
 * 3. meanwhile createPayment completes: the new workflow task goes to A's dead sticky queue too (still sticky then),
 *    and the refund update is admitted to that task;
 * 4. worker B takes the query first. Its history is fetched at poll time, so it already holds the activity's result,
 *    and sdk-core, replaying the uncached run for the query, applies that result in an activation of its own: the
 *    workflow emits the upsert, the timer and the submit's answer (the query answers `succeeded`, ahead of history);
 * 5. the task then reaches B (after its own sticky timeout) with the refund's request message; the activity's events
 *    are already processed, so the update is delivered in a later activation: the refund validator passes and the
 *    workflow task completes [upsert, timer, submit completed, refund accepted, start child]. Replayed from history,
 *    sdk-core hands the workflow the update together with the activity result (update first) -> TMPRL1100.
 *
 * Step 2's dead sticky queue is what makes the order deterministic here; in the soak both sat on the normal queue and
 * the query won a race. The first test asserts the SDK's wrong behaviour: when it fails because the replay succeeds,
 * the SDK (or the workflow's shape) no longer has the bug; flip it then. The others run the same race with what the
 * payment receives now (a capture signal, a provider event routed by query then signal, a cancellation request, a
 * routed event on a payment that announces its events) and replay every history.
 *
 * The five races run at the same time (`it.concurrent`; jest's default maxConcurrency is 5): each has its own task
 * queue, workers A and B, merchant and workflow ids, so none can take another's query or task, and most of a race is
 * waiting on a dead sticky queue, so the file takes about one race's time instead of five.
 */
import { randomUUID } from 'node:crypto';
import { spawn } from 'node:child_process';
import path from 'node:path';
import { WithStartWorkflowOperation, type WorkflowHandle, WorkflowUpdateStage } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker } from '@temporalio/worker';
import pino from 'pino';
import { deliverProviderEvent } from '../../src/client/provider-events';
import { captureRequest, paymentQuery, refundUpdate, submitUpdate } from '../../src/domain/definitions';
import { chargeWorkflowId } from '../../src/domain/ids';
import { ChargeRequest, type PaymentView } from '../../src/domain/payment';
import { MerchantIdAttr, OrderIdAttr, PaymentStatusAttr, ProviderAttr } from '../../src/domain/search-attributes';
import type { ChargeWorkflowInput } from '../../src/domain/workflow-inputs';
import { createProvider, simulatorCapabilities } from '../../src/providers';
import type { CreatePaymentResult, PaymentProvider, ProviderPayment } from '../../src/providers/types';
import { type RunningSimulator, startSimulator } from '../../src/simulator/server';
import { createWorkers } from '../../src/stack';
import { chargeFingerprint } from '../../src/client/fingerprint';
import type { chargeWorkflow } from '../../src/workflows';
import { chargeRequest, fastTimings, workflowBundle } from '../helpers/payments';
import { workflowBundlePath } from '../helpers/workflow-bundle';
import { connectDevServer } from '../helpers/servers';
import { recordHistories } from '../helpers/workflows';
import { eventually } from '../helpers/eventually';
import type { StickyWorkerSpec } from './sticky-worker';

const { EventType } = temporal.api.enums.v1;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Worker A's sticky schedule-to-start timeout: how long the query (step 2), then the result's task (step 3) wait on its
 * dead sticky queue. The SDK's default is 10 s; the race needs more than {@link ORDERING_MARGIN_MS} plus the time from
 * the test's go to the task (scheduled before the query's timeout resets stickiness) and to worker B polling (before
 * the query reaches the normal queue).
 */
const STICKY_TIMEOUT_MS = 7_000;
/**
 * The time between the query (step 2) and the result's task (step 3): the query reaches the normal queue, and worker
 * B, that long before the task does, so it is B's window to answer the query (rebuilding the uncached run) and the
 * test's to send its request. 3 s were too short once, for the full suite under the soak's load (5275219).
 */
const ORDERING_MARGIN_MS = 4_000;

/** Spawns sticky-worker.ts and resolves once it polls; kill() SIGKILLs it. */
async function spawnStickyWorker(spec: StickyWorkerSpec) {
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(__dirname, 'sticky-worker.ts')], {
    env: { ...process.env, ND_WORKER_SPEC: JSON.stringify(spec) },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: false,
  });
  const killOnExit = () => child.kill('SIGKILL');
  process.once('exit', killOnExit);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  let err = '';
  child.stderr.on('data', (c: Buffer) => (err += c.toString()));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('sticky worker not ready within 90 s')), 90_000);
    let out = '';
    child.stdout.on('data', (c: Buffer) => {
      out += c.toString();
      if (out.includes('ready\n')) {
        clearTimeout(timer);
        resolve();
      }
    });
    void exited.then(() => reject(new Error(`sticky worker exited before ready: ${err.slice(-2_000)}`)));
  });
  return {
    async kill() {
      child.kill('SIGKILL');
      await exited;
      process.off('exit', killOnExit);
    },
  };
}

/** The event types of a history, with each update's name and sequencing event. */
function shapeOf(history: temporal.api.history.v1.IHistory): string[] {
  return (history.events ?? []).map((e) => {
    const name = (EventType[e.eventType ?? 0] ?? String(e.eventType)).replace('EVENT_TYPE_', '');
    const acc = e.workflowExecutionUpdateAcceptedEventAttributes;
    return acc
      ? `${name}(${acc.acceptedRequest?.input?.name},seq=${String(acc.acceptedRequestSequencingEventId)})`
      : name;
  });
}

let env: TestWorkflowEnvironment;
let sim: RunningSimulator;
const cleanups: (() => Promise<unknown>)[] = [];

beforeAll(async () => {
  env = await connectDevServer();
  sim = await startSimulator({ port: 0 });
});

afterAll(async () => {
  for (const c of cleanups.reverse()) await c().catch(() => undefined);
  await sim?.close();
  await env?.teardown();
});

/** How a run of the race is set up: by default an automatic capture, queried by the test itself. */
interface SplitOptions<T> {
  readonly capture?: 'automatic' | 'manual';
  /**
   * Sends the query of step 2 (default: `handle.query(paymentQuery)`) once worker A is dead. With a trigger the
   * provider commits the create before the gate holds its answer back, and `created` is that payment.
   */
  readonly trigger?: (run: SplitRun) => Promise<T>;
  /** The charge announces its events to its merchant (`merchantEvents` in its input). */
  readonly merchantEvents?: boolean;
}

/** What a trigger may use: the payment, the provider's payment of its create, the real provider, the task queue. */
interface SplitRun {
  readonly handle: WorkflowHandle;
  readonly created: ProviderPayment | undefined;
  readonly owner: { readonly merchantId: string; readonly key: string };
  readonly provider: PaymentProvider;
  readonly taskQueue: string;
}

/**
 * Steps 1-3 of the mechanism: a lean charge whose first task ran on worker A (SIGKILLed while createPayment is in
 * flight), a query dispatched while no task is pending, then createPayment completed (its task pending on A's dead
 * sticky queue). Answers what the test needs to send its request and run worker B (steps 4-5).
 */
async function querySplit<T = PaymentView>(options: SplitOptions<T> = {}) {
  const { client } = env;
  const logger = pino({ level: 'silent' });
  const apiKey = `sk_test_${randomUUID()}`;
  await sim.setMerchant(apiKey, { idempotency: true, key_ttl_s: 86_400 });
  const capabilities = simulatorCapabilities(86_400);
  const real = createProvider({
    name: 'simulator',
    baseUrl: sim.url,
    apiKey,
    capabilities,
    connectTimeoutMs: 1_000,
    totalTimeoutMs: 3_000,
    logger,
  });
  cleanups.push(() => real.close());
  // createPayment waits for the test's go: the activity is in flight while worker A dies. With a trigger the provider
  // commits the create first and only its answer waits (the trigger's event names the provider's payment).
  let go!: () => void;
  const gate = new Promise<void>((resolve) => (go = resolve));
  let committed!: (created: CreatePaymentResult) => void;
  const created = new Promise<CreatePaymentResult>((resolve) => (committed = resolve));
  const gated = new Proxy(real, {
    get(target, prop) {
      const value: unknown = Reflect.get(target, prop, target);
      if (typeof value !== 'function') return value;
      // Methods run on the provider itself (its private fields), only createPayment waits for the gate.
      if (prop !== 'createPayment') return (value as (...a: unknown[]) => unknown).bind(target);
      const create = (...args: unknown[]) =>
        (value as (...a: unknown[]) => Promise<CreatePaymentResult>).apply(target, args);
      return async (...args: unknown[]) => {
        if (!options.trigger) {
          await gate;
          return create(...args);
        }
        const answer = await create(...args);
        committed(answer);
        await gate;
        return answer;
      };
    },
  }) as PaymentProvider;

  const taskQueue = `nd-${randomUUID()}`;
  const bundle = await workflowBundle();
  const bundlePath = await workflowBundlePath();

  // Here: the provider's activity worker (runs from the start) and worker B (polls only from step 4).
  const [workerB, providerWorker] = (await createWorkers({
    connection: env.nativeConnection,
    namespace: 'default',
    taskQueue,
    providers: { simulator: gated },
    logger,
    workflows: { workflowBundle: bundle },
  })) as [Worker, Worker];
  const providerRun = providerWorker.run();
  cleanups.push(async () => {
    providerWorker.shutdown();
    await providerRun;
  });
  const workerA = await spawnStickyWorker({
    temporalAddress: env.address,
    taskQueue,
    workflowBundlePath: bundlePath,
    simulatorUrl: sim.url,
    apiKey,
    stickyTimeoutMs: STICKY_TIMEOUT_MS,
  });
  cleanups.push(() => workerA.kill());

  // The lean charge, started with Update-with-Start of `submit`, as the API client did before `accept` (8cab414): its
  // answer comes in the result's task, which is what the races order a request against (the capture race says why).
  const request = ChargeRequest.parse(chargeRequest({ capture: options.capture ?? 'automatic' }));
  const merchantId = `m_${randomUUID().slice(0, 8)}`;
  const key = `key_${randomUUID()}`;
  const input: ChargeWorkflowInput = {
    merchantId,
    key,
    fingerprint: chargeFingerprint(request),
    request,
    timings: fastTimings,
    capabilities,
    shape: 2,
    ...(options.merchantEvents ? { merchantEvents: true as const } : {}),
  };
  const workflowId = chargeWorkflowId(merchantId, key);
  cleanups.push(() => client.workflow.getHandle(workflowId).terminate('test finished'));
  await client.workflow.startUpdateWithStart(submitUpdate, {
    args: [{ fingerprint: input.fingerprint }],
    waitForStage: WorkflowUpdateStage.ACCEPTED,
    startWorkflowOperation: new WithStartWorkflowOperation<typeof chargeWorkflow>('chargeWorkflow', {
      workflowId,
      taskQueue,
      workflowIdConflictPolicy: 'FAIL',
      args: [input],
      typedSearchAttributes: [
        { key: PaymentStatusAttr, value: 'pending' },
        { key: MerchantIdAttr, value: merchantId },
        { key: OrderIdAttr, value: request.orderId },
        { key: ProviderAttr, value: request.provider },
      ],
    }),
  });
  const handle = client.workflow.getHandle(workflowId);
  await eventually(
    'createPayment in flight',
    async () => {
      const d = await handle.describe();
      const started = temporal.api.enums.v1.PendingActivityState.PENDING_ACTIVITY_STATE_STARTED;
      return d.raw.pendingActivities?.some((a) => a.state === started) ? true : undefined;
    },
    30_000,
    100,
  );

  const answer = options.trigger ? await created : undefined;
  const providerPayment = answer && answer.outcome !== 'declined' ? answer.payment : undefined;
  const trigger = options.trigger ?? ((run: SplitRun) => run.handle.query(paymentQuery) as Promise<T>);

  // 1. Worker A dies with the workflow sticky to it.
  await workerA.kill();
  // 2. A query while no workflow task is pending: dispatched directly, it waits on A's sticky queue (STICKY_TIMEOUT_MS).
  // Its own deadline, well past the time it waits there: the client's default let it time out in one CI run, and 60 s
  // in two more ("query timed out before a worker could process it", on a CI machine running two test files at once):
  // moved to the normal queue, the query waits in one of its four partitions until one of B's few normal-queue
  // pollers reaches it, which the server's one-minute long polls can delay past a minute. Three minutes leave room
  // for two more poll cycles; a run that needs them is slower, not wrong.
  const queried = client.connection.withDeadline(Date.now() + 180_000, () =>
    trigger({ handle, created: providerPayment, owner: { merchantId, key }, provider: real, taskQueue }),
  );
  // The ordering margin (not a wait for a condition): the task of step 3 must reach A's dead sticky queue well after
  // the query did, so the query's sticky timeout (and with it the move to the normal queue) comes first, and before
  // that timeout resets stickiness (checked below).
  await sleep(ORDERING_MARGIN_MS);
  // 3. createPayment completes; its workflow task (scheduled on A's sticky queue) admits the refund.
  go();
  await eventually(
    'the workflow task of the result',
    async () => {
      const d = await handle.describe();
      return (d.raw.pendingActivities?.length ?? 0) === 0 && d.raw.pendingWorkflowTask ? true : undefined;
    },
    30_000,
    100,
  );
  // Whether the race was set up: the result's task went to A's sticky queue, not (stickiness reset already) to the
  // normal one. Seen reset early now and then, with the SDK's 10 s timeout and a 6 s margin too (the query's sticky
  // attempt ended at once, cause not known): such a run cannot split.
  const scheduled = (await handle.fetchHistory()).events?.filter((e) => e.workflowTaskScheduledEventAttributes).at(-1);
  const kind = scheduled?.workflowTaskScheduledEventAttributes?.taskQueue?.kind ?? 0;
  const notSetUp =
    kind === temporal.api.enums.v1.TaskQueueKind.TASK_QUEUE_KIND_STICKY
      ? undefined
      : `the result's task went to ${temporal.api.enums.v1.TaskQueueKind[kind]}`;
  return { client, handle, queried, workerB, bundle, workflowId, notSetUp };
}

/**
 * A run whose race was not set up (see querySplit): said so (`race` names it among the concurrent ones) and its query
 * left alone; the caller runs the race again.
 */
function dropped(
  race: string,
  run: number,
  split: { readonly notSetUp: string | undefined; readonly queried: Promise<unknown> },
) {
  if (split.notSetUp === undefined) return false;
  split.queried.catch(() => undefined);
  console.info(`${race}, run ${run}: the race was not set up (${split.notSetUp}), run again`);
  return true;
}

it.concurrent(
  'a query that replays an uncached charge past its last workflow task makes the refund accepted after the result: replay fails (TMPRL1100)',
  async () => {
    // Up to three runs until one is set up, as the other races do: with five races in one process, a run whose
    // stickiness reset before the result's task (see querySplit) came 2 times in about 35 concurrent runs. The third
    // must be set up.
    let split = await querySplit();
    for (let run = 1; run < 3 && dropped('the refund update', run, split); run++) split = await querySplit();
    const { client, handle, queried, workerB, bundle, workflowId, notSetUp } = split;
    expect({ notSetUp }).toEqual({ notSetUp: undefined });
    const updateId = `refund-${randomUUID()}`;
    // Started without waiting: the server holds the request until the task that admitted it is processed.
    void handle
      .startUpdate(refundUpdate, {
        args: [{ refundKey: `ref_${randomUUID()}`, fingerprint: 'refund-fp', amount: 100 }],
        updateId,
        waitForStage: WorkflowUpdateStage.ACCEPTED,
      })
      .catch(() => undefined);
    const pollUpdate = (stage: temporal.api.enums.v1.UpdateWorkflowExecutionLifecycleStage) =>
      client.workflowService.pollWorkflowExecutionUpdate({
        namespace: 'default',
        updateRef: { workflowExecution: { workflowId }, updateId },
        identity: 'query-before-task.test',
        waitPolicy: { lifecycleStage: stage },
      });
    const {
      UPDATE_WORKFLOW_EXECUTION_LIFECYCLE_STAGE_ADMITTED: ADMITTED,
      UPDATE_WORKFLOW_EXECUTION_LIFECYCLE_STAGE_ACCEPTED: ACCEPTED,
    } = temporal.api.enums.v1.UpdateWorkflowExecutionLifecycleStage;
    await eventually(
      'the refund admitted',
      () =>
        pollUpdate(ADMITTED).then(
          () => true,
          () => undefined,
        ),
      30_000,
      100,
    );

    // 4./5. Worker B, with no cache of the run, takes the query, then the task.
    const { view, outcome } = await workerB.runUntil(async () => {
      const v = await queried;
      // Accepted, or completed by a rejection (the validator's failure).
      const polled = await eventually(
        'the refund accepted or refused',
        () =>
          pollUpdate(ACCEPTED).then(
            (r) => r,
            () => undefined,
          ),
        30_000,
        100,
      );
      const refused = polled.outcome?.failure?.message;
      return { view: v, outcome: refused === undefined || refused === null ? 'accepted' : `refused: ${refused}` };
    });

    // The query answered from state ahead of history: no completed workflow task holds createPayment's result yet.
    expect(view.status).toBe('succeeded');
    // The first execution validated the refund against that state and accepted it (without the query, the validator
    // sees the payment still pending and refuses it: `Only a captured payment can be refunded; this one is pending`).
    expect(outcome).toBe('accepted');
    const history = await handle.fetchHistory();
    const shape = shapeOf(history);
    const accepted = shape.findIndex((s) => s.startsWith('WORKFLOW_EXECUTION_UPDATE_ACCEPTED(refund'));
    const upsert = shape.findIndex(
      (s, i) => i > shape.indexOf('ACTIVITY_TASK_COMPLETED') && s === 'UPSERT_WORKFLOW_SEARCH_ATTRIBUTES',
    );
    const taskCompleted = shape.lastIndexOf('WORKFLOW_TASK_COMPLETED', upsert);
    // One workflow task completed the result's commands and THEN accepted the refund (the soak's shape).
    expect(upsert).toBeGreaterThan(0);
    expect(accepted).toBeGreaterThan(upsert);
    expect(shape.slice(taskCompleted + 1, accepted)).not.toContain('WORKFLOW_TASK_COMPLETED');

    // Replayed from that history, sdk-core delivers the refund before the result: the soak's nondeterminism.
    await expect(Worker.runReplayHistory({ workflowBundle: bundle }, history)).rejects.toThrow(
      /Update machine does not handle this event: HistoryEvent\(id: \d+, UpsertWorkflowSearchAttributes\)/,
    );
  },
  300_000,
);

it.concurrent(
  'the same race with a capture sent as a signal (as the client sends it now): it acts after the result, the history replays',
  async () => {
    // For a signal the split needs it to arrive after the query's history was read and before the task reaches B (an
    // update is admitted to the task beforehand, a signal is an event any later read includes), so the scenario runs up
    // to three times until a run splits; a run that does not split cannot fail on the order, so one must split (every
    // run so far split at its first try). Split, the result's task completes [upsert, timer, submit's answer, the
    // capture's child]; replayed, the signal and the result come in one activation and submit and the capture wake at
    // the same condition pass, so their order is one of microtask turns, which the capture's wait (readyForRequest,
    // 6ba3f87) supplies: its async body and its extra `condition(() => true)` add one each, and the capture needs one
    // of them to start its child after submit's answer. With 6ba3f87 reverted (the handler awaiting `condition(() =>
    // this.state.firstCallSettled)` itself, nothing parked) this race fails replay: `Child workflow machine does not
    // handle this event: ... WorkflowExecutionUpdateCompleted`; without only the extra pass, or only `parked` (the main
    // line reaches its wait in the result's microtasks, before that pass), it replays. A capture, not a refund: the
    // refund's path awaits its wallet share (none here) one turn longer, and that turn alone kept the refund's child
    // behind submit's answer with 6ba3f87 reverted (that race stayed green). The charge starts with `submit`, as before
    // `accept`: `accept` answers in the first task, so the result's task has no answer to order against (started with
    // `accept`, the race replayed with 6ba3f87 reverted too).
    let splits = 0;
    for (let run = 1; run <= 3 && splits === 0; run++) {
      const race = await querySplit({ capture: 'manual' });
      if (dropped('query split with a capture signal', run, race)) continue;
      const { handle, queried, workerB, bundle } = race;
      const captureKey = `cap_${randomUUID()}`;
      const answer = await workerB.runUntil(async () => {
        // 4. B answers the query from the result it applied early (no completed task holds it yet)...
        expect((await queried).status).toBe('authorized');
        // ...and the capture signal goes out at once: if the task has not reached B yet, B delivers it in an activation
        // after the result's, as it did the update.
        await handle.signal(captureRequest.requested, {
          captureKey,
          fingerprint: 'capture-fp',
          requestId: 'req-split',
        });
        return eventually(
          'the capture settled',
          async () => {
            const a = await handle.query(captureRequest.answer, 'capture', captureKey, 'req-split', 'capture-fp');
            return a?.settled ? a : undefined;
          },
          30_000,
          100,
        );
      });
      expect(answer.refusal).toBeUndefined();
      expect(answer.view.amountCaptured).toBe(1_000);
      const history = await handle.fetchHistory();
      const shape = shapeOf(history);
      const result = shape.indexOf('ACTIVITY_TASK_COMPLETED');
      const signalled = shape.indexOf('WORKFLOW_EXECUTION_SIGNALED', result);
      // Split: the signal came in the task of the result (no workflow task completed between them).
      const split = signalled > result && !shape.slice(result, signalled).includes('WORKFLOW_TASK_COMPLETED');
      if (split) splits += 1;
      // Replayed, sdk-core hands a split signal over before the result; the capture acts only once readyForRequest
      // let it, so the commands come in the order the first execution wrote them.
      await Worker.runReplayHistory({ workflowBundle: bundle }, history);
      // A split history for the replay test: it guards the order without the race (the code before 6ba3f87 fails it).
      if (split) await recordHistories({ env }, 'capture-signal-query-split', [handle.workflowId]);
      console.info(`query split with a capture signal, run ${run}: ${splits > 0 ? 'split' : 'no split'}, replayed`);
    }
    expect(splits).toBe(1);
  },
  600_000,
);

it.concurrent(
  'a provider event routed by query then signal, its query the one that splits: the history replays',
  async () => {
    // The router (src/client/provider-events.ts) asks the payment by query first and signals only news, at once: its
    // query is the one of step 2 and its signal lands in the window before the result's task, the very recipe of the
    // split. The event tells more than the create's result: the provider voided the authorization. Seen on the code
    // before events waited (`whenReady`): the first execution applied the result (upsert authorized, expiry timer,
    // submit's answer) and then the event (upsert voided, timer cancelled), replay applied the event first and failed.
    let splits = 0;
    for (let run = 1; run <= 3 && splits === 0; run++) {
      const race = await querySplit({
        capture: 'manual',
        trigger: async ({ created, owner, provider, taskQueue }) => {
          if (!created) throw new Error('the provider answered the create with no payment');
          const voided = await provider.voidPayment(created.id, { idempotencyKey: `void_${randomUUID()}`, attempt: 1 });
          const event = {
            eventId: `evt_${randomUUID()}`,
            type: 'payment.voided' as const,
            created: Math.floor(Date.now() / 1000),
            payment: voided,
          };
          const routing = { client: env.client, namespace: 'default', taskQueue, retainMs: 60_000, matchWaitMs: 0 };
          return deliverProviderEvent(routing, 'simulator', event, owner);
        },
      });
      if (dropped('query split with a routed provider event', run, race)) continue;
      const { handle, queried, workerB, bundle } = race;
      const delivered = await workerB.runUntil(async () => {
        const d = await queried;
        await eventually(
          'the payment voided',
          async () => ((await handle.query(paymentQuery)).status === 'voided' ? true : undefined),
          30_000,
          100,
        );
        return d;
      });
      // Signalled to the payment: the router's query answered `authorized` from the result applied early.
      expect(delivered).toBe('payment');
      const history = await handle.fetchHistory();
      const shape = shapeOf(history);
      const result = shape.indexOf('ACTIVITY_TASK_COMPLETED');
      const signalled = shape.indexOf('WORKFLOW_EXECUTION_SIGNALED', result);
      const split = signalled > result && !shape.slice(result, signalled).includes('WORKFLOW_TASK_COMPLETED');
      if (split) splits += 1;
      // Replayed, sdk-core hands the event over before the result; the payment applies it only once everything the
      // result set off has run, as the first execution did.
      await Worker.runReplayHistory({ workflowBundle: bundle }, history);
      // A split history for the replay test: it guards the order for good (the code before fails it).
      if (split) await recordHistories({ env }, 'provider-event-query-split', [handle.workflowId]);
      console.info(
        `query split with a routed provider event, run ${run}: ${splits > 0 ? 'split' : 'no split'}, replayed`,
      );
    }
    expect(splits).toBe(1);
  },
  600_000,
);

it.concurrent(
  'a cancellation request in the same window is decided after the result: the authorization is voided, the history replays',
  async () => {
    // The web UI's "Request Cancellation" sent right after a query that applied the create's result early: the first
    // execution gets it after the result, replay in the result's activation. The payment decides it once its task
    // settled (cancellation-request.ts), so it voids the authorization after the result's commands both times.
    let splits = 0;
    for (let run = 1; run <= 3 && splits === 0; run++) {
      const race = await querySplit({ capture: 'manual' });
      if (dropped('query split with a cancellation request', run, race)) continue;
      const { handle, queried, workerB, bundle } = race;
      const view = await workerB.runUntil(async () => {
        expect((await queried).status).toBe('authorized');
        await handle.cancel();
        return eventually(
          'the payment voided',
          async () => {
            const v = await handle.query(paymentQuery);
            return v.status === 'voided' ? v : undefined;
          },
          30_000,
          100,
        );
      });
      expect(view.operations).toEqual([expect.objectContaining({ kind: 'void', state: 'succeeded' })]);
      const history = await handle.fetchHistory();
      const shape = shapeOf(history);
      const result = shape.indexOf('ACTIVITY_TASK_COMPLETED');
      const requested = shape.indexOf('WORKFLOW_EXECUTION_CANCEL_REQUESTED', result);
      if (requested > result && !shape.slice(result, requested).includes('WORKFLOW_TASK_COMPLETED')) splits += 1;
      expect(shape).not.toContain('WORKFLOW_EXECUTION_CANCELED');
      await Worker.runReplayHistory({ workflowBundle: bundle }, history);
      console.info(
        `query split with a cancellation request, run ${run}: ${splits > 0 ? 'split' : 'no split'}, replayed`,
      );
    }
  },
  600_000,
);

it.concurrent(
  'a payment that announces its events, a routed provider event splitting its task: each event is handed over after what it announces, the history replays',
  async () => {
    // The same race as the routed provider event, with the payment announcing to its merchant: the result's
    // `payment.authorized` is handed over in the query's early activation, the event's `payment.voided` in the next; the
    // announcer watches the state at condition passes, so replay (event and result in one activation) hands them over
    // in the same places among the other commands.
    let splits = 0;
    for (let run = 1; run <= 3 && splits === 0; run++) {
      const race = await querySplit({
        capture: 'manual',
        merchantEvents: true,
        trigger: async ({ created, owner, provider, taskQueue }) => {
          if (!created) throw new Error('the provider answered the create with no payment');
          const voided = await provider.voidPayment(created.id, { idempotencyKey: `void_${randomUUID()}`, attempt: 1 });
          const event = {
            eventId: `evt_${randomUUID()}`,
            type: 'payment.voided' as const,
            created: Math.floor(Date.now() / 1000),
            payment: voided,
          };
          const routing = { client: env.client, namespace: 'default', taskQueue, retainMs: 60_000, matchWaitMs: 0 };
          return deliverProviderEvent(routing, 'simulator', event, owner);
        },
      });
      if (dropped('query split with merchant events', run, race)) continue;
      const { handle, queried, workerB, bundle } = race;
      await workerB.runUntil(async () => {
        await queried;
        await eventually(
          'the payment voided and both events handed over',
          async () => {
            const voided = (await handle.query(paymentQuery)).status === 'voided';
            const handed = shapeOf(await handle.fetchHistory()).filter((s) => s === 'ACTIVITY_TASK_COMPLETED').length;
            return voided && handed >= 3 ? true : undefined; // the create, then one handoff per event
          },
          30_000,
          100,
        );
      });
      const history = await handle.fetchHistory();
      const shape = shapeOf(history);
      const result = shape.indexOf('ACTIVITY_TASK_COMPLETED');
      const signalled = shape.indexOf('WORKFLOW_EXECUTION_SIGNALED', result);
      const split = signalled > result && !shape.slice(result, signalled).includes('WORKFLOW_TASK_COMPLETED');
      if (split) splits += 1;
      const handoffs = (history.events ?? [])
        .map((e) => e.activityTaskScheduledEventAttributes)
        .filter((a) => a?.activityType?.name === 'announcePaymentEvent');
      expect(handoffs).toHaveLength(2);
      await Worker.runReplayHistory({ workflowBundle: bundle }, history);
      if (split) await recordHistories({ env }, 'merchant-events-query-split', [handle.workflowId]);
      console.info(`query split with merchant events, run ${run}: ${splits > 0 ? 'split' : 'no split'}, replayed`);
    }
  },
  600_000,
);
