/**
 * Captures, refunds and operators' verdicts sent to a running payment the way production's client sends them
 * (src/client): the payment's check query first (a refusal records nothing), then the request as a signal (unless the
 * payment knows its key already: nothing is sent again), then its answer read by query until it settled. The update
 * handlers the payment keeps for older runs are covered by the histories that recorded them (test/histories/
 * *-by-updates.*.json), not by tests.
 */
import { randomUUID } from 'node:crypto';
import type { WorkflowHandle } from '@temporalio/client';
import type { SignalDefinition } from '@temporalio/common';
import {
  type CaptureArgs,
  type RefundArgs,
  type RequestId,
  type RequestRefusal,
  type ResolveArgs,
  captureRequest,
  refundRequest,
  resolveRequest,
} from '../../src/domain/definitions';
import type { PaymentView } from '../../src/domain/payment';

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

/** The messages a request needs: a handle of a charge workflow (any run: queries and signals go to the latest). */
type PaymentHandle = Pick<WorkflowHandle, 'query' | 'signal'>;

/** How long a request's answer is read for at most (real time): the update it replaces waited as long as it took. */
const ANSWER_WAIT_MS = 30_000;

/** Captures (all that is authorized without an amount); answers the view once its first provider call settled. */
export function capture(handle: PaymentHandle, args: CaptureArgs, waitMs = ANSWER_WAIT_MS): Promise<PaymentView> {
  return moveMoney(handle, 'capture', args.captureKey, args, captureRequest.requested, waitMs);
}

/** Refunds; answers the view once its first provider call settled. */
export function refund(handle: PaymentHandle, args: RefundArgs, waitMs = ANSWER_WAIT_MS): Promise<PaymentView> {
  return moveMoney(handle, 'refund', args.refundKey, args, refundRequest.requested, waitMs);
}

async function moveMoney<Args extends CaptureArgs | RefundArgs>(
  handle: PaymentHandle,
  kind: 'capture' | 'refund',
  key: string,
  args: Args,
  signal: SignalDefinition<[Args & RequestId]>,
  waitMs: number,
): Promise<PaymentView> {
  const check = await handle.query(captureRequest.check, kind, args);
  if (check.refusal) throw new RequestRefused(check.refusal);
  const requestId = randomUUID();
  if (check.known !== true) await handle.signal(signal, { ...args, requestId });
  const answer = await readUntil(
    `the ${kind} ${key}`,
    () => handle.query(captureRequest.answer, kind, key, requestId, args.fingerprint, check.answeredByTry),
    (a) => a.settled,
    waitMs,
  );
  if (answer.refusal) throw new RequestRefused(answer.refusal);
  return answer.view;
}

/** An operator's verdict on a payment under review; answers the view once the payment applied it. */
export async function resolve(handle: PaymentHandle, args: ResolveArgs, waitMs = ANSWER_WAIT_MS): Promise<PaymentView> {
  const refusal = await handle.query(resolveRequest.check);
  if (refusal) throw new RequestRefused(refusal);
  const requestId = randomUUID();
  await handle.signal(resolveRequest.requested, { ...args, requestId });
  const answer = await readUntil(
    'the verdict',
    () => handle.query(resolveRequest.answer, requestId),
    () => true,
    waitMs,
  );
  if (answer.refusal) throw new RequestRefused(answer.refusal);
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

/**
 * Reads an answer query until it answers and `done` holds (real time, bounded: a request the payment never answers
 * fails the test instead of hanging it).
 */
async function readUntil<T>(
  what: string,
  read: () => Promise<T | null>,
  done: (answer: T) => boolean,
  waitMs: number,
): Promise<T> {
  const deadline = Date.now() + waitMs;
  for (;;) {
    const answer = await read();
    if (answer !== null && done(answer)) return answer;
    if (Date.now() > deadline) throw new Error(`${what} was not answered within ${waitMs} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
