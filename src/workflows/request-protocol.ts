import { ApplicationFailure, TemporalFailure, type setHandler } from '@temporalio/workflow';
import type { PaymentRequest, RequestId, RequestRefusal } from '../domain/definitions';

/** How the payment handles one kind of {@link PaymentRequest}. */
export interface RequestHandling<Args, Check, Answer, CheckArgs extends unknown[], AnswerArgs extends unknown[]> {
  /** The payment's rules on the request now (the check query); records nothing. */
  check(...args: CheckArgs): Check;
  /** The request itself, run once the payment is ready for it; a Temporal failure it throws is its refusal. */
  act(args: Args & RequestId): Promise<unknown>;
  /** Keeps what the request's caller reads back: its refusal, if it was refused. */
  keep(args: Args & RequestId, refusal: RequestRefusal | undefined): void;
  /** One request's answer (the answer query): null while the request is not handled yet. */
  answer(...args: AnswerArgs): Answer | null;
}

/**
 * The payment's side of the request protocol, one implementation for every kind: the check query answers what the
 * rules say now, the signal acts once `ready` and keeps its answer (a refusal is kept for the caller, not thrown: a
 * failure thrown from a signal handler would fail the whole payment), the answer query reads it back by request id.
 * Capture and refund share their queries (the kind comes first): both register the same check and answer.
 */
export function serveRequest<Args, Check, Answer, CheckArgs extends unknown[], AnswerArgs extends unknown[]>(
  set: typeof setHandler,
  request: PaymentRequest<Args, Check, Answer, CheckArgs, AnswerArgs>,
  ready: () => Promise<void>,
  handling: RequestHandling<Args, Check, Answer, CheckArgs, AnswerArgs>,
): void {
  set(request.requested, async (args) => {
    await ready();
    let refusal: RequestRefusal | undefined;
    try {
      await handling.act(args);
    } catch (err) {
      if (!(err instanceof TemporalFailure)) throw err;
      refusal = refusalOf(err);
    }
    handling.keep(args, refusal);
  });
  set(request.check, (...args) => handling.check(...args));
  set(request.answer, (...args) => handling.answer(...args));
}

/**
 * A refusal as data a query can answer: an ApplicationFailure's type, message and details (what the update's validator
 * would have thrown); another Temporal failure (e.g. a failed provider look-up) by its name.
 */
export function refusalOf(err: TemporalFailure): RequestRefusal {
  if (!(err instanceof ApplicationFailure)) return { type: err.name, message: err.message };
  return {
    type: err.type ?? 'Error',
    message: err.message,
    ...(err.details && err.details.length > 0 ? { details: [...err.details] } : {}),
  };
}

/** The refusal `check` throws, or null. */
export function refusalOrNull(check: () => void): RequestRefusal | null {
  try {
    check();
    return null;
  } catch (err) {
    if (err instanceof TemporalFailure) return refusalOf(err);
    throw err;
  }
}
