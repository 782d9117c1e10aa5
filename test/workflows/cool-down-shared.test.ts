/**
 * The provider-wide cool-down end to end, in real time on the dev server: one 429 with `Retry-After: 3` answered to one
 * workflow's create holds back the next creates of every other workflow on that provider, in both worker processes,
 * for about 3 s, with no create request inside the window (the simulator ledger's request times).
 *
 * Two worker processes share one redis-server: this one and a child (test/helpers/worker-process.ts). Each polls its
 * own task queue, so which process runs which payment is fixed: the 429 is seen by the child, and most of the other
 * payments run here, where only the shared store can tell them to wait.
 */
import type { WorkflowHandle } from '@temporalio/client';
import type { ChargeWorkflowInput } from '../../src/domain/workflow-inputs';
import { chargeRequest } from '../helpers/payments';
import { observeBreaker, redisFixture, startWorkerPair } from '../helpers/shared-breaker';
import { eventually } from '../helpers/eventually';
import { requestsOf, startChargeOn, waitForStatus } from '../helpers/workflows';

const fx = redisFixture();
const RETRY_AFTER_S = 3;
const JITTER_MS = 200;
const policy = {
  failureThreshold: 5, // one 429 does not trip the breaker: only the cool-down holds the others back
  window: { durationMs: 60_000, failureRate: 1, minimumCalls: 1_000_000 },
  cooldownMs: 10_000,
  probeTimeoutMs: 10_000,
  jitterMs: JITTER_MS,
};
/** Short create retries: a refused attempt comes back after the cool-down (its nextRetryDelay), nothing else waits. */
const retry = {
  create: { budgetMs: 30_000, attemptTimeoutMs: 5_000, initialIntervalMs: 100, maximumIntervalMs: 200 },
};

/** How long a busy worker may take from receiving an attempt to its breaker check (a full suite on two cores). */
const DISPATCH_MS = 500;

/**
 * The attempt on which the workflow's createPayment activity completed (history), when it was scheduled, and when that
 * last attempt was handed to a worker.
 */
async function createActivity(
  handle: WorkflowHandle,
): Promise<{ attempt: number; scheduledMs: number; startedMs: number }> {
  const events = (await handle.fetchHistory()).events ?? [];
  const scheduled = events.find((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'createPayment');
  const started = events.find(
    (e) => Number(e.activityTaskStartedEventAttributes?.scheduledEventId ?? -1) === Number(scheduled?.eventId ?? -2),
  );
  const ms = (t: { seconds?: unknown; nanos?: number | null } | null | undefined) =>
    Number(t?.seconds ?? 0) * 1_000 + Math.floor((t?.nanos ?? 0) / 1e6);
  return {
    attempt: started?.activityTaskStartedEventAttributes?.attempt ?? 0,
    scheduledMs: ms(scheduled?.eventTime),
    startedMs: ms(started?.eventTime),
  };
}

/**
 * One run of the scenario on a fresh world and worker pair, every money and timing check made; answers whether other
 * workflows were held by the cool-down in this process and in the child (the test means nothing unless both were).
 */
async function coolDownRun(): Promise<{ heldHere: boolean; heldThere: boolean; summary: string }> {
  const b = await fx.world({ totalTimeoutMs: 2_000 });
  const here = b.taskQueue; // this process's workers
  const there = `${b.taskQueue}-child`; // the child's workers
  const calls = { creates: 0 };
  const pair = await startWorkerPair(fx, b, { policy, here, there, calls });
  const observer = observeBreaker(fx, policy, pair.keyPrefix);
  // Started without waiting for their first answer: that wait would eat the window.
  const start = (taskQueue: string, input: ChargeWorkflowInput) => startChargeOn(b, input, taskQueue);
  const first = b.input(chargeRequest(), { retry });
  b.sim.addFaults({
    rules: [
      {
        match: { operation: 'create', reference: first.request.orderId },
        fault: 'status',
        status: 429,
        retry_after_s: RETRY_AFTER_S,
        times: 1,
      },
    ],
  });
  const seer = await start(there, first);
  // Its first attempt has failed, so its outcome (and the cool-down) was recorded: the activity waits for attempt 2.
  await eventually(
    'the 429 to fail the first attempt',
    async () => {
      const { raw } = await seer.describe();
      const create = raw.pendingActivities?.find((a) => a.activityType?.name === 'createPayment');
      return (create?.attempt ?? 0) >= 2 ? true : undefined;
    },
    10_000,
    10, // the window is 3 s: every 10 ms of waiting here is 10 ms less of it for the others
  );
  const [the429] = requestsOf(b, 'create');
  expect(the429?.status).toBe(429);
  const t429 = the429?.at_ms ?? 0;
  const windowEnd = t429 + RETRY_AFTER_S * 1_000;

  // Every other workflow on this provider starts inside the window: four here, two beside the one that saw the 429.
  const inputs = Array.from({ length: 6 }, () => b.input(chargeRequest(), { retry }));
  const others = await Promise.all(inputs.map((input, i) => start(i < 4 ? here : there, input)));
  const startedAllBy = Date.now();
  expect(startedAllBy).toBeLessThan(windowEnd - 1_000); // the test means something only if they started inside it

  for (const h of [seer, ...others]) await waitForStatus(h, 'succeeded', 20_000);
  const creates = requestsOf(b, 'create');
  expect(creates[0]).toEqual(the429); // the ledger is in arrival order: nothing came before the 429
  const after429 = creates.slice(1).map((r) => r.at_ms ?? 0);
  // No create request inside the window, from either process, for any workflow (the 429's own retry included).
  expect(after429.filter((at) => at < windowEnd)).toEqual([]);
  // About 3 s: the first writes after it come at its end (plus the refusal's jitter and a retry's dispatch).
  expect(Math.min(...after429) - windowEnd).toBeLessThan(JITTER_MS + 1_500);
  // The shared "not before" is the Retry-After counted from when the child read the answer.
  const notBefore = await observer.coolDownUntil('simulator');
  expect(notBefore - t429).toBeGreaterThanOrEqual(RETRY_AFTER_S * 1_000);
  expect(notBefore - t429).toBeLessThan(RETRY_AFTER_S * 1_000 + 1_000);
  // Each other workflow was held by the cool-down: refused at least once (its create completed on attempt 2 or later),
  // unless a slow worker (a loaded machine) only handed it its first attempt once the cool-down was over: then that
  // attempt is its one send, after the window (the ledger above). Held ones in both processes, or the test means nothing.
  const activities = await Promise.all(others.map(createActivity));
  for (const a of activities) {
    expect({ ...a, heldOrStartedAfter: a.attempt >= 2 || a.startedMs >= notBefore - DISPATCH_MS }).toMatchObject({
      heldOrStartedAfter: true,
    });
  }
  const refused = activities.map((a) => a.attempt >= 2);
  expect(creates.map((r) => r.status)).toEqual([429, 200, 200, 200, 200, 200, 200, 200]);
  const keys = new Set(creates.map((r) => r.idempotency_key));
  expect(keys.size).toBe(7);
  expect(b.ledger().effects.filter((e) => e.operation === 'create')).toHaveLength(7);

  const childCreates = await pair.stop();
  // The four here ran in this process, the 429's workflow (twice) and two others in the child.
  expect(calls.creates).toBe(4);
  expect(childCreates).toBe(4);
  return {
    heldHere: refused.slice(0, 4).some(Boolean),
    heldThere: refused.slice(4).some(Boolean),
    summary: `cool-down: 429 at ${t429}, not before ${notBefore} (+${notBefore - t429} ms); first other create at +${Math.min(...after429) - t429} ms, last at +${Math.max(...after429) - t429} ms; 0 creates inside the window; others started by +${startedAllBy - t429} ms; refused ${refused.map(Number).join('')}`,
  };
}

it('one 429 with Retry-After: 3 seen by one workflow delays the next creates of every other workflow, in both processes, by about 3 s', async () => {
  // A loaded machine may hand every other workflow of one process its first attempt only after the window: that run
  // holds every check above but shows nothing held there. Then the scenario runs again on a fresh world (at most 3
  // runs); one run must show workflows held in both processes.
  const runs: string[] = [];
  let held = { heldHere: false, heldThere: false };
  for (let run = 1; run <= 3 && !(held.heldHere && held.heldThere); run++) {
    const { summary, ...last } = await coolDownRun();
    runs.push(summary);
    held = last;
  }
  console.info(runs.join('\n'));
  expect(held).toEqual({ heldHere: true, heldThere: true });
}, 180_000);
