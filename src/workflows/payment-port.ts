import type { KeyScope } from '../domain/ids';
import type { PaymentStatus } from '../domain/payment';
import type { ProviderPayment } from '../domain/provider-payment';
import type { ChargeWorkflowInput } from '../domain/workflow-inputs';
import type { PaymentState } from './payment-state';
import type { ProviderBinding } from './provider-binding';

/**
 * What the charge's parts (its create, its money movements, its operator review) see of the payment they work on: its
 * input and state, the provider holding it with its binding, and how provider news and status changes are recorded
 * and published. The entity (payment-entity.ts) implements it and owns the parts; they never import the entity.
 */
export interface PaymentPort {
  readonly input: ChargeWorkflowInput;
  readonly state: PaymentState;
  /** The provider that holds the payment now: the request's, or the fallback the charge failed over to. */
  readonly provider: string;
  /** The scope of the charge's provider key (the holder's after a failover). */
  readonly keyScope: KeyScope;
  /** The binding of the provider holding the payment; `NotReady` while it has none. */
  requireBinding(): ProviderBinding;
  /**
   * Applies what the provider says (forward only), settles a review it answers, and publishes the status; at `at`
   * where the result that says it carries its time, else the workflow's clock.
   */
  learn(payment: ProviderPayment, at?: string): void;
  /**
   * Sets the status (with the review reason of `needs_review`) at `at` (the time the result that decided it recorded,
   * where it carries one; else the workflow's clock) and publishes it.
   */
  transition(status: PaymentStatus, reason?: string, at?: string): void;
  /** Keeps the view's list of captures, refunds and voids in step with the sub-operations (and their answers). */
  syncOperations(): void;
  /**
   * A reconcile child the provider's news cancelled is still ending: the run does not continue as new before it has
   * (its parent close policy would terminate it, and the web UI would show a reconcile killed instead of cancelled).
   */
  reconcileEnding(ended: Promise<unknown>): void;
}

/** Workflow time now, as the view's timestamps are written. */
export const nowIso = (): string => new Date().toISOString();

/**
 * The time a change that carries one (`at`: when the API took a webhook or a verdict) is stamped with: `at`, never
 * before the view's last change (`last`); without one, the workflow's clock. ISO-8601 UTC strings order as times.
 */
export const stampOf = (at: string | undefined, last: string): string =>
  at === undefined ? nowIso() : at > last ? at : last;
