/**
 * Provider events that match no open payment are parked: kept durably in a small workflow, so the webhook can be
 * acknowledged (the provider stops redelivering) without losing the money movement it reports.
 */
import { defineQuery } from '@temporalio/workflow';
import type { ProviderEvent } from './definitions';

/** Why an event was parked. */
export type ParkReason =
  /** No payment of ours carries the event's metadata or reference. */
  | 'unmatched'
  /** Several payments share the reference and none is known to own the provider payment. */
  | 'ambiguous'
  /** The payment's workflow has closed and the event shows a change its final view does not. */
  | 'payment_closed';

/** Input of `parkedProviderEventWorkflow` (set by the first event; later events only add to it). */
export interface ParkedEventInput {
  readonly provider: string;
  readonly providerPaymentId: string;
  /** The provider's `reference`: our order id, if it is ours. */
  readonly reference: string;
  readonly reason: ParkReason;
  /** Known when the event carried our metadata. */
  readonly merchantId?: string;
  readonly paymentKey?: string;
  /** The workflow completes after this long without a new event. */
  readonly retainMs: number;
}

/** What a parked-event workflow holds (its query answer and result). */
export interface ParkedEvents {
  readonly input: ParkedEventInput;
  readonly events: readonly ProviderEvent[];
}

/** Events kept per parked workflow; older ones are dropped first (a provider redelivering forever is bounded). */
export const maxParkedEvents = 100;

/** The parked events of one provider payment. */
export const parkedEventsQuery = defineQuery<ParkedEvents>('parkedEvents');

/** `provider-event:<provider>:<providerPaymentId>`: one per provider payment, whatever the events. */
export const parkedEventWorkflowId = (provider: string, providerPaymentId: string): string =>
  `provider-event:${provider}:${providerPaymentId}`;
