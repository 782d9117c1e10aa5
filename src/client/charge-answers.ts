/**
 * What a charge answers when its own submit did not: a repeat of a running payment, a closed payment's stored answer,
 * a start that no worker answered in time. Read from what Temporal durably has (description, memo, queries).
 */
import {
  QueryNotRegisteredError,
  ServiceError,
  WorkflowExecutionAlreadyStartedError,
  WorkflowNotFoundError,
  type WorkflowExecutionDescription,
} from '@temporalio/client';
import { firstAnswerQuery, paymentQuery } from '../domain/definitions';
import { type PaymentView, isSettledStatus } from '../domain/payment';
import { PaymentStatusAttr } from '../domain/search-attributes';
import { startingView } from '../domain/starting-view';
import type { ChargeWorkflowInput } from '../domain/workflow-inputs';
import { type ChargeHandle, type ClientContext, bounded, chargeHandle } from './context';
import { IdempotencyKeyReused } from './errors';
import { isTemporalUnavailable } from './failures';
import { readUntil } from './read-until';

/**
 * A charge's answer: the view, and whether the payment already existed (a repeat of the same key and body);
 * `completed: false` when no worker answered in time and the view is the payment as Temporal started it (202).
 */
export interface ChargeResult {
  readonly view: PaymentView;
  readonly replayed: boolean;
  readonly completed?: boolean;
}

/** Memo of a charge workflow: the fingerprint (compared on a closed run) and which request started it. */
export interface ChargeMemo {
  readonly fingerprint?: string;
  readonly startedBy?: string;
}

/** Whether this request's start created the run (the memo names the request that started it). */
export async function wasStartedBy(ctx: ClientContext, workflowId: string, startedBy: string): Promise<boolean> {
  const description = await chargeHandle(ctx, workflowId).describe();
  return (description.memo as ChargeMemo | undefined)?.startedBy === startedBy;
}

/**
 * The submit update got no answer in time (no worker took it, or Temporal did not answer), or the payment existed
 * already (a repeat): whether the payment was started decides. Started (by this request or an identical one): it is
 * durable and goes on, so the answer is its view once its first provider call settled, read by query until
 * `answerBy`; without a worker to answer, its view as started (`pending`, 202). Not started: the original error (503,
 * the caller repeats with the same key). Started with another body under this key: {@link IdempotencyKeyReused}.
 */
export async function startedWithoutAnswer(
  ctx: ClientContext,
  workflowId: string,
  fingerprint: string,
  startedBy: string,
  input: ChargeWorkflowInput,
  original: unknown,
  answerBy: number,
): Promise<ChargeResult> {
  let description: WorkflowExecutionDescription;
  try {
    description = await ctx.client.connection.withDeadline(Math.max(answerBy, Date.now() + 250), () =>
      chargeHandle(ctx, workflowId).describe(),
    );
  } catch (describeFailure) {
    // A repeat (the start said "already started") that Temporal does not describe in time: it is busy, the payment
    // exists and goes on; the caller repeats (503). Never the start's own "already started" error (a 500).
    if (original instanceof WorkflowExecutionAlreadyStartedError) {
      throw isTemporalUnavailable(describeFailure)
        ? describeFailure
        : new ServiceError('The payment exists but Temporal did not describe it in time', {
            cause: describeFailure instanceof Error ? describeFailure : new Error(String(describeFailure)),
          });
    }
    // Not found: not started, nothing will happen under this key. Unreachable: the same answer. The caller repeats.
    throw original;
  }
  if (description.status.name !== 'RUNNING') return replayClosed(ctx, workflowId, fingerprint, original);
  if ((await storedFingerprint(ctx, description)) !== fingerprint) {
    throw new IdempotencyKeyReused('This idempotency key was used for a different payment request', {
      cause: original,
    });
  }
  const replayed = (description.memo as ChargeMemo | undefined)?.startedBy !== startedBy;
  const answered = await firstAnswer(ctx, workflowId, answerBy);
  if (answered) return { view: answered, replayed };
  const status = description.typedSearchAttributes.get(PaymentStatusAttr);
  const startedAt = description.startTime.toISOString();
  // Only the not-yet-settled statuses: a settled one comes with amounts this description does not carry.
  const view = startingView(input, status === 'unknown' ? 'unknown' : 'pending', startedAt);
  return { view, replayed, completed: false };
}

/**
 * What a repeat of a running payment answers: its first final answer once it has one, else its view once its first
 * provider call settled (its progress), read by query (nothing in history) until `answerBy`; past it the current
 * view if a worker answered at all, undefined if none did.
 */
export async function firstAnswer(
  ctx: ClientContext,
  workflowId: string,
  answerBy: number,
): Promise<PaymentView | undefined> {
  const handle = chargeHandle(ctx, workflowId);
  let last: PaymentView | undefined;
  try {
    const read = async () => {
      const answer = await ctx.client.connection.withDeadline(Math.max(answerBy, Date.now() + 250), () =>
        handle.query(firstAnswerQuery),
      );
      last = progressOf(answer);
      return answer;
    };
    const answer = await readUntil(read, (a) => a.settled, answerBy);
    // Its first final answer once there is one; before that its progress (unknown, in review: a 202).
    return answer.replay ?? progressOf(answer);
  } catch (err) {
    // A payment started before this query existed answers the plain view (its first call settled long ago).
    if (err instanceof QueryNotRegisteredError) return bounded(ctx, () => handle.query(paymentQuery));
    if (!isTemporalUnavailable(err)) throw err;
    return last; // no worker answered in time
  }
}

/**
 * What an answer read before its payment settled may say: its view while the view is progress (pending, unknown, in
 * review: a 202). An answered status not settled yet (its task still settles the wallet part) is not what the key will
 * replay: nothing, so the caller answers the payment as still moving (202), never a 200 its repeats would contradict.
 */
function progressOf(answer: { readonly settled: boolean; readonly view: PaymentView }): PaymentView | undefined {
  return answer.settled || !isSettledStatus(answer.view.status) ? answer.view : undefined;
}

/** A repeat against a closed payment: the stored result for the same fingerprint, else the key was reused. */
export async function replayClosed(
  ctx: ClientContext,
  workflowId: string,
  fingerprint: string,
  original: unknown,
): Promise<ChargeResult> {
  const handle = chargeHandle(ctx, workflowId);
  let description: WorkflowExecutionDescription;
  try {
    description = await handle.describe();
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) throw original;
    throw err;
  }
  if ((await storedFingerprint(ctx, description)) !== fingerprint) {
    throw new IdempotencyKeyReused('This idempotency key was used for a different payment request', {
      cause: original,
    });
  }
  return { view: await closedFirstAnswer(ctx, handle, description), replayed: true };
}

/**
 * A closed payment's first final answer. A declined or failed payment closed right after it (its result is that
 * answer); any other is read by query from its history (a worker replays it), since its result is the view at close
 * (after captures, refunds, a void). A run from before the answer was recorded answers what it has.
 */
async function closedFirstAnswer(
  ctx: ClientContext,
  handle: ChargeHandle,
  description: WorkflowExecutionDescription,
): Promise<PaymentView> {
  const result = description.status.name === 'COMPLETED' ? await handle.result() : undefined;
  if (result?.status === 'declined' || result?.status === 'failed') return result;
  try {
    const { replay, view } = await bounded(ctx, () => handle.query(firstAnswerQuery));
    return replay ?? result ?? view;
  } catch (err) {
    if (err instanceof QueryNotRegisteredError && result !== undefined) return result;
    throw err;
  }
}

/** The fingerprint in the memo; a run that continued as new without its memo falls back to the chain's first run. */
async function storedFingerprint(
  ctx: ClientContext,
  description: WorkflowExecutionDescription,
): Promise<string | undefined> {
  const own = (description.memo as ChargeMemo | undefined)?.fingerprint;
  const firstRunId = description.raw.workflowExecutionInfo?.firstRunId;
  if (own !== undefined || !firstRunId || firstRunId === description.runId) return own;
  const first = await ctx.client.workflow.getHandle(description.workflowId, firstRunId).describe();
  return (first.memo as ChargeMemo | undefined)?.fingerprint;
}
