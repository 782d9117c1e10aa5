/**
 * Update, signal and query definitions: shared by the workflows (handlers) and the client (callers), so the client
 * never imports workflow code. Names are part of the history: never rename one, add a new one.
 */
import { defineQuery, defineSignal, defineUpdate } from '@temporalio/workflow';
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
export type ResolveArgs = ResolveRequest & { readonly operator?: string };

/** Submits the charge (Update-with-Start); answers the view once the first provider call settled or after `submitWaitMs`. */
export const submitUpdate = defineUpdate<PaymentView, [SubmitArgs]>('submit');

/** Captures an authorized payment (full or partial); validated against the current state before any side effect. */
export const captureUpdate = defineUpdate<PaymentView, [CaptureArgs]>('capture');

/** Refunds part or all of what was captured and not yet refunded; validated before any side effect. */
export const refundUpdate = defineUpdate<PaymentView, [RefundArgs]>('refund');

/**
 * Capture and refund as requests in history (signals), answered through queries. An update accepted in the same
 * workflow task as a provider result is replayed by the SDK (TypeScript 1.24.0) before that result although the first
 * execution handled it after (docs/operations.md, "Update-ordering nondeterminism"): a payment's mid-life requests are
 * therefore events, whose place in history replay cannot change. `requestId` names the HTTP request, so a refusal is
 * answered to the request it refused only. The update definitions above stay for payments that already recorded them.
 */
export interface MovementRequest {
  readonly requestId: string;
}
export const captureSignal = defineSignal<[CaptureArgs & MovementRequest]>('captureRequested');
export const refundSignal = defineSignal<[RefundArgs & MovementRequest]>('refundRequested');

/** Why a capture or refund was refused before anything was sent: the same type and details its validator throws. */
export interface MovementRefusal {
  readonly type: string;
  readonly message: string;
  readonly details?: unknown[];
}

/**
 * A capture or refund as the workflow has it for one request: refused, or its operation and the payment's view (once
 * the operation succeeded, the view it succeeded with: what every repeat of its key answers).
 */
export interface MovementAnswer {
  readonly refusal?: MovementRefusal;
  /** The operation under this key has answered its first provider call (or was already known). */
  readonly settled: boolean;
  readonly view: PaymentView;
}

/** A capture or refund checked against the payment's rules: refused, a repeat of a known key, or new and allowed. */
export interface MovementCheck {
  readonly refusal?: MovementRefusal;
  /** The key names an operation with this fingerprint already: its answer is read, nothing is sent again. */
  readonly known?: boolean;
  /**
   * The try under the key that will answer this request (absent: the first): the one running or settled when `known`,
   * the next one after a try that never left (the request is sent, and tries again). Passed to `movementAnswer`.
   */
  readonly answeredByTry?: number;
}

/** Checks a capture or refund against the current state without recording anything. */
export const movementCheckQuery = defineQuery<
  MovementCheck,
  [kind: 'capture' | 'refund', args: CaptureArgs | RefundArgs]
>('movementCheck');

/**
 * The answer to one capture or refund request (`requestId`, with its fingerprint) under its key, once the workflow
 * handled it; null before. `answeredByTry` (from the check; absent: the first) keeps a request that tries again from
 * being answered by the earlier try that never left.
 */
export const movementAnswerQuery = defineQuery<
  MovementAnswer | null,
  [kind: 'capture' | 'refund', key: string, requestId: string, fingerprint: string, answeredByTry?: number]
>('movementAnswer');

/**
 * Whether the first provider call settled (the early answer of `submit`), with the current view and, once recorded,
 * `replay`: the payment's first final answer, which a repeat of its key answers (absent while none was final yet, and
 * in runs that did not record it).
 */
export const firstAnswerQuery = defineQuery<{ settled: boolean; view: PaymentView; replay?: PaymentView }>(
  'firstAnswer',
);

/** An operator's verdict as a request in history (a signal, like capture and refund), answered by query. */
export const resolveSignal = defineSignal<[ResolveArgs & MovementRequest]>('resolveRequested');

/** Whether a payment takes an operator's verdict now (under review): the refusal, or null. Records nothing. */
export const resolveCheckQuery = defineQuery<MovementRefusal | null>('resolveCheck');

/** The answer to one operator request (`requestId`): its refusal, or the view after it; null before it was handled. */
export const resolveAnswerQuery = defineQuery<
  { readonly refusal?: MovementRefusal; readonly view: PaymentView } | null,
  [requestId: string]
>('resolveAnswer');

/** An operator resolves a payment in `needs_review`; rejected in any other status. */
export const resolveUpdate = defineUpdate<PaymentView, [ResolveArgs]>('resolve');

/**
 * How the charge workflow applies a provider event. `whenReady`: once everything the other jobs of its workflow task set
 * off has run, so it acts at the same point whether the worker delivered it with a result or after one a query applied
 * early (docs/sdk-update-ordering.md). Absent in signals sent before it existed: applied at once, as they were then.
 */
export interface ProviderEventHandling {
  readonly whenReady?: boolean;
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
