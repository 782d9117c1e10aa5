/**
 * Reading a workflow's history where its state is not queryable: the input a continued-as-new run started with is
 * the state its previous run carried over (for the charge workflow: the whole `PaymentState`, dedup set included).
 */
import type { Client } from '@temporalio/client';
import { type Payload, defaultPayloadConverter } from '@temporalio/common';
import type { ChargeContinuation } from '../../src/workflows/charge';

/** The run ids of a workflow's chain, oldest first, following continue-as-new from `firstRunId`. */
export async function runChain(client: Client, workflowId: string, firstRunId: string): Promise<string[]> {
  const runs = [firstRunId];
  for (;;) {
    const history = await client.workflow.getHandle(workflowId, runs[runs.length - 1]).fetchHistory();
    const last = history.events?.[history.events.length - 1];
    const next = last?.workflowExecutionContinuedAsNewEventAttributes?.newExecutionRunId;
    if (!next) return runs;
    runs.push(next);
  }
}

/** What the run `runId` of a charge workflow was handed by the run before it (undefined for a first run). */
export async function carriedChargeState(
  client: Client,
  workflowId: string,
  runId: string,
): Promise<ChargeContinuation | undefined> {
  const history = await client.workflow.getHandle(workflowId, runId).fetchHistory();
  const payloads = history.events?.[0]?.workflowExecutionStartedEventAttributes?.input?.payloads ?? [];
  const carried = payloads[1];
  return carried ? defaultPayloadConverter.fromPayload<ChargeContinuation>(carried as Payload) : undefined;
}

/** The first argument of each `signalName` signal the run `runId` received, decoded, in history order. */
export async function signalArgs<T>(
  client: Client,
  workflowId: string,
  runId: string,
  signalName: string,
): Promise<T[]> {
  const history = await client.workflow.getHandle(workflowId, runId).fetchHistory();
  return (history.events ?? [])
    .map((e) => e.workflowExecutionSignaledEventAttributes)
    .filter((a) => a?.signalName === signalName)
    .map((a) => defaultPayloadConverter.fromPayload<T>(a?.input?.payloads?.[0] as Payload));
}
