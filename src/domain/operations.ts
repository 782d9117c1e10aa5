import type { ProviderCapabilities, ProviderPayment } from './provider-payment';
import type { RetryOverrides, WriteOperation } from './retry-policy';

/**
 * What a reconcile looks for at the provider to call a write "done". Amounts are absolute provider totals computed
 * from the payment's single serialized state before the write was sent, so a lookup can tell "this write happened"
 * from "an earlier write happened".
 */
export type Expectation =
  | { readonly kind: 'created'; readonly amount: number; readonly currency: string }
  | { readonly kind: 'captured'; readonly amountCapturedAtLeast: number }
  | { readonly kind: 'refunded'; readonly amountRefundedAtLeast: number }
  | { readonly kind: 'voided' };

/** Input of `reconcileWorkflow`: a durable wait-and-check for one write whose outcome is unknown. */
export interface ReconcileInput {
  readonly merchantId: string;
  /** The user's idempotency key of the write (payment key, capture key or refund key). */
  readonly key: string;
  readonly operation: WriteOperation;
  readonly provider: string;
  /** Set when a charge failed over to `provider`: its create key is scoped to it (see `scopeOf`). */
  readonly keyProvider?: string;
  /** Our order id, sent to the provider as `reference`. */
  readonly reference: string;
  /** Provider payment id, known for capture/refund/void. */
  readonly paymentId?: string;
  readonly expect: Expectation;
  readonly capabilities: ProviderCapabilities;
  /** Waits between checks, ms: e.g. 15 s, 30 s, 1 min, 2 min, 4 min, 8 min, 1 h, 6 h. */
  readonly scheduleMs: readonly number[];
  /** How long after the first send the provider surely shows a committed write. */
  readonly settleWindowMs: number;
  /** Workflow time of the first send, ms since epoch: the provider's key lifetime counts from it. */
  readonly firstSentAtMs: number;
  /** What to resend with the same key when the provider honours keys and nothing was found: a create's request. */
  readonly resubmit?: ResubmitCreate;
  /**
   * The same for a capture or refund. A field of its own, not `resubmit`: a worker from before it reads `resubmit` as a
   * create, and must ignore a movement's (it then reviews the movement, as it always did) instead of sending a create.
   */
  readonly resubmitMovement?: ResubmitMovement;
  /** Retry overrides of the payment, so lookups and resubmissions follow the same policy. */
  readonly retry?: RetryOverrides;
}

/** A create's request, resent as it was. */
export interface ResubmitCreate {
  readonly kind: 'create';
  readonly amount: number;
  readonly currency: string;
  readonly paymentMethod: string;
  readonly capture: 'automatic' | 'manual';
}

/**
 * A capture's or refund's request, resent as it was: its amount, and the provider's total before it (the payment's
 * serialized state when it was first sent), with which the activity recognises its own earlier effect.
 */
export interface ResubmitMovement {
  readonly kind: 'capture' | 'refund';
  readonly amount: number;
  readonly totalBefore: number;
}

/** What a reconcile may resend with the same key: one of the three writes a payment sends under its own key. */
export type Resubmission = ResubmitCreate | ResubmitMovement;

/** How a reconcile ended. It never guesses `failed`: only the provider's own answer or an operator says so. */
export type ReconcileResult = (
  | {
      readonly outcome: 'found';
      readonly payment: ProviderPayment;
      readonly via: 'webhook' | 'lookup' | 'resubmit';
      readonly checks: number;
    }
  | { readonly outcome: 'declined'; readonly declineCode: string; readonly checks: number }
  | { readonly outcome: 'rejected'; readonly reason: string; readonly checks: number }
  | { readonly outcome: 'needs_review'; readonly reason: string; readonly checks: number }
) & {
  /** How many requests its resubmission may have sent to the provider (absent: none, or recorded before counting). */
  readonly resubmissionSends?: number;
  /**
   * When the reconcile decided (its own workflow clock, recorded with its result): the payment's view takes it, so a
   * replay and a query that applies the result ahead of its task stamp the same time. Absent in results before it.
   */
  readonly at?: string;
};
