/**
 * Captures, refunds and operators' verdicts sent to a running payment the way production's client sends them
 * (src/client/request-protocol.ts, the same code): the payment's check query first (a refusal records nothing), then the request as a signal (unless the
 * payment knows its key already: nothing is sent again), then its answer read by query until it settled. The update
 * handlers the payment keeps for older runs are covered by the histories that recorded them (test/histories/
 * *-by-updates.*.json), not by tests.
 */
import { Client, type WorkflowHandle } from '@temporalio/client';
import {
  type CaptureArgs,
  type MovementAnswer,
  type RefundArgs,
  type RequestRefusal,
  type ResolveArgs,
  captureRequest,
  refundRequest,
  resolveRequest,
} from '../../src/domain/definitions';
import type { PaymentView } from '../../src/domain/payment';
import type { ClientContext } from '../../src/client/context';
import { sendRequest } from '../../src/client/request-protocol';

/** A request the payment refused, before anything was sent or when it handled it: the refusal's type and details. */
export class RequestRefused extends Error {
  readonly type: string;
  readonly details: unknown[] | undefined;

  constructor(refusal: RequestRefusal) {
    super(refusal.message);
    this.name = 'RequestRefused';
    this.type = refusal.type;
    this.details = refusal.details;
  }
}

/** A handle of a charge workflow (any run: queries and signals go to the latest); its client sends the request. */
type PaymentHandle = Pick<WorkflowHandle, 'workflowId' | 'client'>;

/** How long a request's answer is read for at most (real time): the update it replaces waited as long as it took. */
const ANSWER_WAIT_MS = 30_000;

/**
 * The client context of `handle`: production's protocol over the test's connection, each call bounded by `waitMs`.
 * Its payload codecs are carried; a failure converter is not (no test client that sends requests has one).
 */
const contextOf = (handle: PaymentHandle, waitMs: number): ClientContext => {
  const { connection, options } = handle.client;
  const dataConverter = { payloadCodecs: options.loadedDataConverter.payloadCodecs };
  const client = new Client({ connection, namespace: options.namespace, dataConverter });
  return { client, namespace: options.namespace, rpcTimeoutMs: waitMs };
};

const refused = (refusal: RequestRefusal): Error => new RequestRefused(refusal);

/** Captures (all that is authorized without an amount); answers the view once its first provider call settled. */
export function capture(handle: PaymentHandle, args: CaptureArgs, waitMs = ANSWER_WAIT_MS): Promise<PaymentView> {
  return moveMoney(handle, 'capture', args.captureKey, args, waitMs);
}

/** Refunds; answers the view once its first provider call settled. */
export function refund(handle: PaymentHandle, args: RefundArgs, waitMs = ANSWER_WAIT_MS): Promise<PaymentView> {
  return moveMoney(handle, 'refund', args.refundKey, args, waitMs);
}

async function moveMoney(
  handle: PaymentHandle,
  kind: 'capture' | 'refund',
  key: string,
  args: CaptureArgs | RefundArgs,
  waitMs: number,
): Promise<PaymentView> {
  const { answer } = await sendRequest(contextOf(handle, waitMs), handle.workflowId, {
    request: kind === 'capture' ? captureRequest : refundRequest,
    args,
    checkArgs: [kind, args],
    verdict: (check) => check,
    answerArgs: (requestId, check) => [kind, key, requestId, args.fingerprint, check.answeredByTry],
    done: (a: MovementAnswer | null) => a?.settled === true,
    waitMs,
    refused,
  });
  if (answer?.settled !== true) throw new Error(`the ${kind} ${key} was not answered within ${waitMs} ms`);
  return answer.view;
}

/** An operator's verdict on a payment under review; answers the view once the payment applied it. */
export async function resolve(handle: PaymentHandle, args: ResolveArgs, waitMs = ANSWER_WAIT_MS): Promise<PaymentView> {
  const { answer } = await sendRequest(contextOf(handle, waitMs), handle.workflowId, {
    request: resolveRequest,
    args,
    checkArgs: [],
    verdict: (refusal) => ({ refusal }),
    answerArgs: (requestId) => [requestId],
    done: (handled) => handled !== null,
    waitMs,
    refused,
  });
  if (answer === null) throw new Error(`the verdict was not answered within ${waitMs} ms`);
  return answer.view;
}

/** The type of the refusal a request met; fails the test when the request was answered instead. */
export async function refusalType(request: Promise<unknown>): Promise<string> {
  try {
    await request;
  } catch (err) {
    if (err instanceof RequestRefused) return err.type;
    throw err;
  }
  throw new Error('expected the request to be refused');
}
