/**
 * Workflow-test helpers: start a payment the way the time-skipping server allows (start + `submit` update; it has no
 * Update-with-Start), poll a status with a deadline, and record histories for the replay test.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { type WorkflowHandle, WorkflowUpdateFailedError } from '@temporalio/client';
import { ApplicationFailure, defaultPayloadConverter } from '@temporalio/common';
import { temporal } from '@temporalio/proto';
import { readUntil } from '../../src/client/read-until';
import { acceptUpdate, firstAnswerQuery, paymentQuery } from '../../src/domain/definitions';
import type { PaymentStatus, PaymentView } from '../../src/domain/payment';
import type { ChargeWorkflowInput } from '../../src/domain/workflow-inputs';
import type { chargeWorkflow } from '../../src/workflows';
import { eventually } from './eventually';
import { idOf } from './payments';
import type { World } from './world';

export const HISTORIES_DIR = path.resolve(__dirname, '..', 'histories');

/** Starts a charge and returns its handle and the early answer of `submit`. */
export async function startCharge(
  world: World,
  input: ChargeWorkflowInput,
): Promise<{ handle: WorkflowHandle<typeof chargeWorkflow>; view: PaymentView }> {
  const handle = await world.env.client.workflow.start<typeof chargeWorkflow>('chargeWorkflow', {
    workflowId: idOf(input),
    taskQueue: world.taskQueue,
    args: [input],
    memo: { fingerprint: input.fingerprint },
  });
  world.track(handle.workflowId);
  const accepted = await handle.executeUpdate(acceptUpdate, { args: [{ fingerprint: input.fingerprint }] });
  // `accept` answers at once: the first call's answer is read by query, as the API's client reads it.
  if (accepted.status !== 'pending') return { handle, view: accepted };
  const answerBy = Date.now() + input.timings.submitWaitMs;
  const answer = await readUntil(
    () => handle.query(firstAnswerQuery),
    (a) => a.settled,
    answerBy,
  );
  return { handle, view: answer.view };
}

/**
 * Starts a charge on `taskQueue` (default the world's) without waiting for its first answer: for tests where the
 * `submit` wait would cost time they measure, or where several worker sets poll different queues.
 */
export async function startChargeOn(
  world: World,
  input: ChargeWorkflowInput,
  taskQueue = world.taskQueue,
): Promise<WorkflowHandle<typeof chargeWorkflow>> {
  const handle = await world.env.client.workflow.start<typeof chargeWorkflow>('chargeWorkflow', {
    workflowId: idOf(input),
    taskQueue,
    args: [input],
    memo: { fingerprint: input.fingerprint },
  });
  world.track(handle.workflowId);
  return handle;
}

/**
 * Polls the payment query until `status` (real time, bounded). Used where an activity runs over real HTTP after a
 * skipped timer fired.
 */
export const waitForStatus = (
  handle: WorkflowHandle,
  status: PaymentStatus,
  timeoutMs = 15_000,
): Promise<PaymentView> =>
  eventually(
    `payment ${handle.workflowId} reaching ${status}`,
    async () => {
      const view = await handle.query(paymentQuery);
      // Thrown, not answered false: the timeout's message names the last view.
      if (view.status !== status) throw new Error(`view ${JSON.stringify(view)}`);
      return view;
    },
    timeoutMs,
    100,
  );

/**
 * Writes the histories of `workflowIds` to test/histories/<name>.<n>.json when RECORD_HISTORIES=1. The replay test
 * replays every file there against the current workflow code, so a change that breaks running workflows fails CI.
 */
export async function recordHistories(
  world: Pick<World, 'env'>,
  name: string,
  workflowIds: string[],
  /** One run of a single workflow (e.g. the one that continued as new); absent: each workflow's latest run. */
  runId?: string,
): Promise<void> {
  if (process.env.RECORD_HISTORIES !== '1') return;
  mkdirSync(HISTORIES_DIR, { recursive: true });
  for (const [i, workflowId] of workflowIds.entries()) {
    const history = await world.env.client.workflow.getHandle(workflowId, runId).fetchHistory();
    // Proto3 JSON (enum names, string longs, base64 bytes): what `temporal workflow show --output json` writes too,
    // so a history exported from production replays through the same test.
    const json = temporal.api.history.v1.History.toObject(temporal.api.history.v1.History.fromObject(history), {
      longs: String,
      enums: String,
      bytes: String,
    });
    writeFileSync(path.join(HISTORIES_DIR, `${name}.${i}.json`), JSON.stringify(json, null, 1) + '\n');
  }
}

/** Counts the ledger's requests of one operation. */
export const requestsOf = (world: World, operation: string) =>
  world.ledger().requests.filter((r) => r.operation === operation);

/** Counts the ledger's effects of one operation. */
export const effectsOf = (world: World, operation: string) =>
  world.ledger().effects.filter((e) => e.operation === operation);

/** The ApplicationFailure type a failed update carries (its validator's or handler's); fails if it succeeds. */
export async function updateFailureType(update: Promise<unknown>): Promise<string | undefined> {
  try {
    await update;
  } catch (err) {
    if (err instanceof WorkflowUpdateFailedError && err.cause instanceof ApplicationFailure)
      return err.cause.type ?? undefined;
    throw err;
  }
  throw new Error('expected the update to fail');
}

/** The activity type a history event's marker records for a local activity, or undefined when it is no such marker. */
export function localActivityTypeOf(e: temporal.api.history.v1.IHistoryEvent): string | undefined {
  const marker = e.markerRecordedEventAttributes;
  const data = marker?.markerName === 'core_local_activity' ? marker.details?.data?.payloads?.[0] : undefined;
  return data ? defaultPayloadConverter.fromPayload<{ activity_type: string }>(data).activity_type : undefined;
}
