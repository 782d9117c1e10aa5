/**
 * Update, signal and query definitions: shared by the workflows (handlers) and the client (callers), so the client
 * never imports workflow code. Names are part of the history: never rename one, add a new one.
 */
import {
  type QueryDefinition,
  type SignalDefinition,
  defineQuery,
  defineSignal,
  defineUpdate,
} from '@temporalio/workflow';
import type { PaymentView, ResolveRequest } from './payment';
import type { ProviderEvent, ProviderPayment } from './provider-payment';

// The zod schemas live in provider-payment.ts (workflow bundles carry no zod); only their types are re-exported here.
export type { ProviderEvent, ProviderPayment };

/** `submit` args: the fingerprint the client computed over the request's significant fields. */
export interface SubmitArgs {
  readonly fingerprint: string;
}

/** `capture` args: the capture's own key and fingerprint; no amount = everything authorized. */
export interface CaptureArgs {
  readonly captureKey: string;
  readonly fingerprint: string;
  readonly amount?: number;
}

/** `refund` args: the refund's own key and fingerprint, and its amount. */
export interface RefundArgs {
  readonly refundKey: string;
  readonly fingerprint: string;
  readonly amount: number;
}

/** `resolve` args: the operator's verdict; `operator` is who (for the audit trail, never customer data). */
export type ResolveArgs = ResolveRequest & {
  readonly operator?: string;
  /**
   * When the API took the verdict (its clock): the payment stamps what the verdict changes with it (never earlier than
   * its view's last change), so a query that applies it ahead of its task answers the same view. Absent in requests
   * sent before it: the task's clock.
   */
  readonly requestedAt?: string;
};

/**
 * Submits the charge (Update-with-Start) as histories before `acceptUpdate` recorded it: answers the view once the first
 * provider call settled or after `submitWaitMs`. Kept registered so those histories replay; no client sends it.
 */
export const submitUpdate = defineUpdate<PaymentView, [SubmitArgs]>('submit');

/**
 * Submits the charge (Update-with-Start): answers at once, in the workflow task that accepts it, with the view as it
 * is then; the caller reads the first call's answer by query (`firstAnswerQuery`). An update answered in a later task
 * can wedge the payment for good (docs/operations.md, "A charge wedged on its submit answer").
 */
export const acceptUpdate = defineUpdate<PaymentView, [SubmitArgs]>('accept');

/** Captures an authorized payment (full or partial); validated against the current state before any side effect. */
export const captureUpdate = defineUpdate<PaymentView, [CaptureArgs]>('capture');

/** Refunds part or all of what was captured and not yet refunded; validated before any side effect. */
export const refundUpdate = defineUpdate<PaymentView, [RefundArgs]>('refund');

/**
 * A request to a running payment (a capture, a refund, an operator's verdict) in three messages: the check query asks
 * the payment's rules first (a refusal records nothing), the signal puts the request into the payment's history, and
 * the answer query reads how the payment handled it, by the request's id (`requestId` names the HTTP request, so a
 * refusal is answered to the request it refused only). Requests are signals, not updates: an update accepted in the
 * same workflow task as a provider result is replayed by the SDK (TypeScript 1.24.0) before that result although the
 * first execution handled it after (docs/operations.md, "Update-ordering nondeterminism"), while a signal is an event
 * whose place in history replay cannot change. The update definitions above stay for payments that recorded them.
 * Each kind keeps the names it was first sent under: running payments, old clients and recorded histories use them.
 */
export interface PaymentRequest<Args, Check, Answer, CheckArgs extends unknown[], AnswerArgs extends unknown[]> {
  readonly requested: SignalDefinition<[Args & RequestId]>;
  readonly check: QueryDefinition<Check, CheckArgs>;
  readonly answer: QueryDefinition<Answer | null, AnswerArgs>;
}

/** The check and answer queries of a {@link PaymentRequest}: capture and refund share theirs (the kind comes first). */
export type RequestQueries<Check, Answer, CheckArgs extends unknown[], AnswerArgs extends unknown[]> = Omit<
  PaymentRequest<never, Check, Answer, CheckArgs, AnswerArgs>,
  'requested'
>;

/** Defines the check and answer queries of a kind of {@link PaymentRequest} under their names. */
export function defineRequestQueries<Check, Answer, CheckArgs extends unknown[], AnswerArgs extends unknown[]>(
  check: string,
  answer: string,
): RequestQueries<Check, Answer, CheckArgs, AnswerArgs> {
  return { check: defineQuery(check), answer: defineQuery(answer) };
}

/** Defines a kind of {@link PaymentRequest}: its signal's name and its queries. */
export function definePaymentRequest<Args, Check, Answer, CheckArgs extends unknown[], AnswerArgs extends unknown[]>(
  requested: string,
  queries: RequestQueries<Check, Answer, CheckArgs, AnswerArgs>,
): PaymentRequest<Args, Check, Answer, CheckArgs, AnswerArgs> {
  return { requested: defineSignal(requested), ...queries };
}

/** The id of one request (see {@link PaymentRequest}). */
export interface RequestId {
  readonly requestId: string;
}

/** Why a request was refused: the type, message and details its update's validator (or handler) throws. */
export interface RequestRefusal {
  readonly type: string;
  readonly message: string;
  readonly details?: unknown[];
}

/**
 * A capture or refund as the workflow has it for one request: refused, or its operation and the payment's view (once
 * the operation succeeded, the view it succeeded with: what every repeat of its key answers).
 */
export interface MovementAnswer {
  readonly refusal?: RequestRefusal;
  /** The operation under this key has answered its first provider call (or was already known). */
  readonly settled: boolean;
  readonly view: PaymentView;
}

/** A capture or refund checked against the payment's rules: refused, a repeat of a known key, or new and allowed. */
export interface MovementCheck {
  readonly refusal?: RequestRefusal;
  /** The key names an operation with this fingerprint already: its answer is read, nothing is sent again. */
  readonly known?: boolean;
  /**
   * The try under the key that will answer this request (absent: the first): the one running or settled when `known`,
   * the next one after a try that never left (the request is sent, and tries again). Passed to the answer query.
   */
  readonly answeredByTry?: number;
}

/** The check query's arguments of a capture or refund: its kind and its args (the signal's, without the request id). */
export type MovementCheckArgs = [kind: 'capture' | 'refund', args: CaptureArgs | RefundArgs];

/**
 * The answer query's arguments of a capture or refund: one request (`requestId`, with its fingerprint) under its key.
 * `answeredByTry` (from the check; absent: the first) keeps a request that tries again from being answered by the
 * earlier try that never left.
 */
export type MovementAnswerArgs = [
  kind: 'capture' | 'refund',
  key: string,
  requestId: string,
  fingerprint: string,
  answeredByTry?: number,
];

/** Capture and refund share their queries (`movementCheck`, `movementAnswer`), the kind first. */
const movementQueries = defineRequestQueries<MovementCheck, MovementAnswer, MovementCheckArgs, MovementAnswerArgs>(
  'movementCheck',
  'movementAnswer',
);

/** A capture of an authorized payment (full or partial) under its own key and fingerprint. */
export const captureRequest = definePaymentRequest<
  CaptureArgs,
  MovementCheck,
  MovementAnswer,
  MovementCheckArgs,
  MovementAnswerArgs
>('captureRequested', movementQueries);

/** A refund of part or all of what was captured and not yet refunded, under its own key and fingerprint. */
export const refundRequest = definePaymentRequest<
  RefundArgs,
  MovementCheck,
  MovementAnswer,
  MovementCheckArgs,
  MovementAnswerArgs
>('refundRequested', movementQueries);

/** The answer to one operator request: its refusal, or the view after it. */
export interface ResolveAnswer {
  readonly refusal?: RequestRefusal;
  readonly view: PaymentView;
}

/**
 * An operator's verdict on a payment under review: the check (no arguments) answers the refusal or null, and the
 * answer is read by the request's id alone.
 */
export const resolveRequest = definePaymentRequest<
  ResolveArgs,
  RequestRefusal | null,
  ResolveAnswer,
  [],
  [requestId: string]
>('resolveRequested', defineRequestQueries('resolveCheck', 'resolveAnswer'));

/**
 * Whether the first provider call settled (the early answer of `submit`), with the current view and, once recorded,
 * `replay`: the payment's first final answer, which a repeat of its key answers (absent while none was final yet, and
 * in runs that did not record it). Not `settled` while an answer is final but not recorded yet (its task still settles
 * the wallet part): the view then is not what the key will replay.
 */
export const firstAnswerQuery = defineQuery<{ settled: boolean; view: PaymentView; replay?: PaymentView }>(
  'firstAnswer',
);

/** An operator resolves a payment in `needs_review`; rejected in any other status. */
export const resolveUpdate = defineUpdate<PaymentView, [ResolveArgs]>('resolve');

/**
 * How the charge workflow applies a provider event. `whenReady`: once everything the other jobs of its workflow task set
 * off has run, so it acts at the same point whether the worker delivered it with a result or after one a query applied
 * early (docs/sdk-update-ordering.md). Absent in signals sent before it existed: applied at once, as they were then.
 */
export interface ProviderEventHandling {
  readonly whenReady?: boolean;
  /**
   * When the API took the webhook (its clock): the payment stamps the change with it (never earlier than its view's
   * last change), so a query that applies the signal ahead of its task answers the same view as the task. Absent in
   * signals sent before it: the task's clock.
   */
  readonly receivedAt?: string;
}

/**
 * A provider webhook, deduplicated by `eventId` and applied monotonically by the charge workflow; `provider` is the
 * provider whose signature it carried (`POST /webhooks/:provider`), so a payment applies only its holder's events
 * (absent in signals sent before it existed); `handling` says how (see {@link ProviderEventHandling}).
 */
export const webhookSignal =
  defineSignal<[event: ProviderEvent, provider?: string, handling?: ProviderEventHandling]>('providerEvent');

/** The payment's current view. */
export const paymentQuery = defineQuery<PaymentView>('payment');

/** Parent → reconcile child: a webhook showed the payment; the child checks it against its expectation and stops waiting. */
export const reconcileResolvedSignal = defineSignal<[ProviderPayment]>('reconcileResolved');

/** Sweep → charge workflow: the payment has been `unknown` too long; start a reconcile unless one is running. */
export const ensureReconcileSignal = defineSignal('ensureReconcile');
