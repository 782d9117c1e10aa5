/**
 * The client's side of the request protocol (`PaymentRequest` in domain/definitions.ts), one implementation for
 * captures, refunds and operators' verdicts: the payment's rules are asked first by query (a refusal records nothing),
 * the request goes into the payment's history as a signal (unless the payment knows it already), and its answer is
 * read by query until it is final or the wait is over (nothing more goes into the history).
 */
import { randomUUID } from 'node:crypto';
import { WorkflowNotFoundError } from '@temporalio/client';
import type { PaymentRequest, RequestRefusal } from '../domain/definitions';
import { type ClientContext, bounded, chargeHandle } from './context';
import { InvalidTransition, PaymentNotFound } from './errors';
import { closedBeforeUpdate, translateUpdateFailure } from './failures';
import { readUntil } from './read-until';

/** One request as the client sends it: its kind, its args, and how to read that kind's check and answer. */
export interface RequestCall<
  Args,
  Check,
  Answer extends { readonly refusal?: RequestRefusal },
  CheckArgs extends unknown[],
  AnswerArgs extends unknown[],
> {
  readonly request: PaymentRequest<Args, Check, Answer, CheckArgs, AnswerArgs>;
  /** The request's args (the signal's, without the request id). */
  readonly args: Args;
  /** The check query's arguments. */
  readonly checkArgs: CheckArgs;
  /** What the check says: a refusal, or that the payment knows the request already (nothing is sent then). */
  readonly verdict: (check: Check) => { readonly refusal?: RequestRefusal | null; readonly known?: boolean };
  /** The answer query's arguments for this request. */
  readonly answerArgs: (requestId: string, check: Check) => AnswerArgs;
  /** The answer is final: reading stops. */
  readonly done: (answer: Answer | null) => boolean;
  /** How long the answer is read for at most. */
  readonly waitMs: number;
  /** The typed error of a refusal (the check's or the answer's). */
  readonly refused: (refusal: RequestRefusal) => Error;
}

/** What a request came to: the last answer read (null: not handled in time), and whether the payment knew it. */
export interface RequestOutcome<Answer> {
  readonly answer: Answer | null;
  readonly known: boolean;
}

/**
 * Sends one request to the payment `workflowId`: check, signal, read the answer. A refusal throws its typed error; a
 * missing payment is {@link PaymentNotFound}, a closed one {@link InvalidTransition}.
 */
export async function sendRequest<
  Args,
  Check,
  Answer extends { readonly refusal?: RequestRefusal },
  CheckArgs extends unknown[],
  AnswerArgs extends unknown[],
>(
  ctx: ClientContext,
  workflowId: string,
  call: RequestCall<Args, Check, Answer, CheckArgs, AnswerArgs>,
): Promise<RequestOutcome<Answer>> {
  const handle = chargeHandle(ctx, workflowId);
  const requestId = randomUUID();
  let check: Check;
  let known = false;
  try {
    check = await bounded(ctx, () => handle.query(call.request.check, ...call.checkArgs));
    const verdict = call.verdict(check);
    if (verdict.refusal) throw call.refused(verdict.refusal);
    known = verdict.known === true;
    if (!known) await bounded(ctx, () => handle.signal(call.request.requested, { ...call.args, requestId }));
  } catch (err) {
    throw await translateClosedOrMissing(ctx, err, workflowId);
  }
  const answerArgs = call.answerArgs(requestId, check);
  const answer = await readUntil(
    () => bounded(ctx, () => handle.query(call.request.answer, ...answerArgs)),
    call.done,
    Date.now() + call.waitMs,
  );
  if (answer?.refusal) throw call.refused(answer.refusal);
  return { answer, known };
}

/** Missing payment → {@link PaymentNotFound}; closed payment → {@link InvalidTransition}; rejections → typed. */
async function translateClosedOrMissing(ctx: ClientContext, err: unknown, workflowId: string): Promise<unknown> {
  if (!(err instanceof WorkflowNotFoundError) && !closedBeforeUpdate(err)) return translateUpdateFailure(err);
  try {
    const description = await chargeHandle(ctx, workflowId).describe();
    return new InvalidTransition(`This payment is closed (${description.status.name.toLowerCase()})`, {
      cause: err,
    });
  } catch (describeErr) {
    if (describeErr instanceof WorkflowNotFoundError) return new PaymentNotFound({ cause: err });
    throw describeErr;
  }
}
