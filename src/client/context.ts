/**
 * What the client's conversations share (starting charges, requests to a payment, review items, reads, provider
 * events): the Temporal client, its namespace and the deadline of each call, with the few helpers every one of them
 * uses. Each conversation is a file of functions over this context, extended with its own settings.
 */
import type { Client, WorkflowHandle } from '@temporalio/client';
import { chargeWorkflowId } from '../domain/ids';
import type { KeyRecordReader } from '../domain/key-records';
import { IdempotencyKey, MerchantId } from '../domain/payment';
import type { chargeWorkflow } from '../workflows';
import { parseOrThrow } from './failures';

/** The Temporal client the conversations talk through. */
export interface ClientContext {
  readonly client: Client;
  readonly namespace: string;
  /**
   * Upper bound of each call to Temporal beyond the workflow's own waits. A call cut off throws a Temporal timeout:
   * nothing is known to have failed, the caller may repeat.
   */
  readonly rpcTimeoutMs: number;
  /**
   * The key-record table (docs/operations.md#key-records): a repeat of a key answers its record first, so it replays
   * (or is refused) even once the workflow is gone. Absent: repeats are answered by the workflow alone.
   */
  readonly keyRecords?: KeyRecordReader;
}

/** A payment's charge workflow. */
export type ChargeHandle = WorkflowHandle<typeof chargeWorkflow>;

/** Runs Temporal calls under a deadline: `rpcTimeoutMs` beyond what the workflow itself may take (`extraMs`). */
export function bounded<T>(ctx: ClientContext, fn: () => Promise<T>, extraMs = 0): Promise<T> {
  return ctx.client.connection.withDeadline(Date.now() + ctx.rpcTimeoutMs + extraMs, fn);
}

/** The handle of a payment's charge workflow (of one run, with `runId`). */
export function chargeHandle(ctx: ClientContext, workflowId: string, runId?: string): ChargeHandle {
  return ctx.client.workflow.getHandle<typeof chargeWorkflow>(workflowId, runId);
}

/** A payment's merchant and key as parsed (a `ValidationError` names the field), and its workflow id. */
export function paymentScope(merchantId: string, key: string) {
  const merchant = parseOrThrow(MerchantId, merchantId, 'merchantId');
  const paymentKey = parseOrThrow(IdempotencyKey, key, 'key');
  return { merchant, paymentKey, workflowId: chargeWorkflowId(merchant, paymentKey) };
}
