/**
 * Captures and refunds: requests to a running payment (request-protocol.ts) under their own idempotency keys, each
 * answered by its operation's own state, never by the payment's alone.
 */
import { WorkflowNotFoundError } from '@temporalio/client';
import {
  type CaptureArgs,
  type MovementAnswer,
  type RefundArgs,
  type RequestRefusal,
  captureRequest,
  paymentQuery,
  refundRequest,
} from '../domain/definitions';
import { captureWorkflowId, parseChargeWorkflowId, refundWorkflowId } from '../domain/ids';
import { CaptureRequest, IdempotencyKey, type PaymentView, RefundRequest } from '../domain/payment';
import { type ClientContext, bounded, chargeHandle, paymentScope } from './context';
import { IdempotencyKeyReused } from './errors';
import { parseOrThrow, translateRefusal } from './failures';
import { captureFingerprint, refundFingerprint } from './fingerprint';
import { operationAnswer, recordedAnswer } from './key-records';
import { sendRequest } from './request-protocol';

/** What captures and refunds need beyond the {@link ClientContext}. */
export interface MoneyRequestContext extends ClientContext {
  /** How long a capture or refund waits for its outcome before answering the current view. */
  readonly operationWaitMs: number;
}

/**
 * A capture's or refund's answer: the view, whether the operation finished within the wait (else 202), and whether it
 * answers a repeat of the operation's key (its first final answer, or its progress while still moving).
 */
export interface OperationResult {
  readonly view: PaymentView;
  readonly completed: boolean;
  readonly replayed?: boolean;
}

/** Captures an authorized payment (all of it without an amount) under its own idempotency key. */
export async function capture(
  ctx: MoneyRequestContext,
  merchantId: string,
  key: string,
  captureKey: string,
  body: unknown = {},
): Promise<OperationResult> {
  const { workflowId, paymentKey } = paymentScope(merchantId, key);
  const opKey = parseOrThrow(IdempotencyKey, captureKey, 'idempotencyKey');
  const request = parseOrThrow(CaptureRequest, body ?? {});
  const fingerprint = captureFingerprint(paymentKey, request);
  const args: CaptureArgs = {
    captureKey: opKey,
    fingerprint,
    ...(request.amount === undefined ? {} : { amount: request.amount }),
  };
  return moveMoney(ctx, workflowId, 'capture', opKey, args);
}

/** Refunds part or all of what was captured, under its own idempotency key. */
export async function refund(
  ctx: MoneyRequestContext,
  merchantId: string,
  key: string,
  refundKey: string,
  body: unknown,
): Promise<OperationResult> {
  const { workflowId, paymentKey } = paymentScope(merchantId, key);
  const opKey = parseOrThrow(IdempotencyKey, refundKey, 'idempotencyKey');
  const request = parseOrThrow(RefundRequest, body);
  const fingerprint = refundFingerprint(paymentKey, request);
  const args: RefundArgs = { refundKey: opKey, fingerprint, amount: request.amount };
  return moveMoney(ctx, workflowId, 'refund', opKey, args);
}

/**
 * Runs a capture or refund as a request: its check answers a refusal, a repeat of a known key (answered from the
 * workflow's record, nothing new in its history: a key whose try never left is not known, its repeat is sent and tries
 * again) or a new request, which is signalled; the caller waits at most `operationWaitMs` for the operation's first
 * provider call to settle (then the current view: the operation goes on in the workflow). The answer follows the
 * operation's own state: `succeeded` (the provider confirmed it) is completed, a refusal by the provider throws
 * {@link ProviderRejected}, anything still open is not completed (202). A repeat is marked replayed: its operation's
 * first final answer (its view when it succeeded, its refusal), or its progress while it is still moving.
 */
async function moveMoney(
  ctx: MoneyRequestContext,
  workflowId: string,
  kind: 'capture' | 'refund',
  opKey: string,
  args: CaptureArgs | RefundArgs,
): Promise<OperationResult> {
  const merchant = parseChargeWorkflowId(workflowId)?.merchantId ?? '';
  const recorded = await recordedAnswer(ctx.keyRecords, kind, merchant, opKey, args.fingerprint);
  if (recorded) {
    const answer = operationAnswer(recorded, kind, opKey, true);
    if (answer) return answer;
  }
  await assertKeyNotUsedElsewhere(ctx, workflowId, kind, opKey);
  const { answer, known: replayed } = await sendRequest(ctx, workflowId, {
    request: kind === 'capture' ? captureRequest : refundRequest,
    args,
    checkArgs: [kind, args],
    verdict: (check) => check,
    // The try under the key the check named answers (see MovementCheck.answeredByTry).
    answerArgs: (requestId, check) => [kind, opKey, requestId, args.fingerprint, check.answeredByTry],
    done: (answer: MovementAnswer | null) => answer?.settled === true,
    waitMs: ctx.operationWaitMs,
    refused: refusalError,
  });
  const view = answer?.view ?? (await bounded(ctx, () => chargeHandle(ctx, workflowId).query(paymentQuery)));
  const shown = answer === null ? undefined : operationAnswer(view, kind, opKey, replayed);
  return shown ?? { view, completed: false, replayed }; // not yet handled
}

/** A capture or refund refused by the payment's rules, as its typed error. */
const refusalError = (refusal: RequestRefusal): Error => translateRefusal(refusal) ?? new Error(refusal.message);

/**
 * A capture or refund key belongs to its first request, merchant-wide: its child workflow (`<kind>:<merchant>:<key>`)
 * names the payment that ran it. A key already run under another payment is {@link IdempotencyKeyReused} before the
 * target payment's own rules are even asked (so the answer is 422, not a 409 about the other payment's state).
 * The payment's own child start (REJECT_DUPLICATE) stays the race-free guard; this only orders the answers.
 */
async function assertKeyNotUsedElsewhere(
  ctx: ClientContext,
  workflowId: string,
  kind: 'capture' | 'refund',
  opKey: string,
): Promise<void> {
  const merchant = parseChargeWorkflowId(workflowId)?.merchantId;
  if (merchant === undefined) return;
  const childId = (kind === 'capture' ? captureWorkflowId : refundWorkflowId)(merchant, opKey);
  let parent: string | undefined;
  try {
    const description = await bounded(ctx, () => ctx.client.workflow.getHandle(childId).describe());
    parent = description.raw.workflowExecutionInfo?.parentExecution?.workflowId ?? undefined;
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return; // a new key
    throw err;
  }
  if (parent !== undefined && parent !== workflowId) {
    throw new IdempotencyKeyReused(`This idempotency key was used for a ${kind} of another payment`);
  }
}
