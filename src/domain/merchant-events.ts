/**
 * Webhooks to the merchant (docs/http-api.md, "Webhooks to your endpoint"): the events a payment announces, the per-merchant delivery workflow's id,
 * task queue and wake signal. Zod-free: the charge workflow and the delivery workflow import it.
 */
import { defineSignal } from '@temporalio/workflow';
import type { PaymentView } from './payment';

/**
 * The statuses a payment announces when it reaches them (`payment.<status>`). `pending` and `unknown` are not news a
 * merchant acts on; `requires_action` is announced once payments can wait for the customer.
 */
export const announcedStatuses: ReadonlySet<string> = new Set([
  'authorized',
  'succeeded',
  'declined',
  'failed',
  'needs_review',
  'voided',
  'requires_action',
]);

/** Every event type a merchant's endpoint receives. */
export const merchantEventTypes = [
  'payment.authorized',
  'payment.succeeded',
  'payment.declined',
  'payment.failed',
  'payment.needs_review',
  'payment.voided',
  'payment.requires_action',
  'payment.refunded',
] as const;
export type MerchantEventType = (typeof merchantEventTypes)[number];

/**
 * One event as the merchant's endpoint receives it: `id` is the same on every delivery of the event, `created` is when
 * the payment announced it (unix seconds), and `payment` is the view `GET /v1/payments/:key` showed at that moment
 * (order several events of one payment by its `updatedAt`).
 */
export interface MerchantEvent {
  readonly id: string;
  readonly type: MerchantEventType;
  readonly created: number;
  readonly data: { readonly payment: PaymentView };
}

/** What a payment hands to its merchant's webhook queue (the `announcePaymentEvent` activity's input). */
export interface PaymentEventAnnouncement {
  readonly merchantId: string;
  readonly event: MerchantEvent;
  /** Workflow time of the announcement (ms): the delivery lag counts from it. */
  readonly announcedAtMs: number;
}

/** What the handoff did: the event is in the merchant's queue, or the merchant has no endpoint (nothing to send). */
export type AnnouncementOutcome = 'queued' | 'no_endpoint' | 'disabled';

/** Input of `merchantWebhooksWorkflow`: the one merchant whose events it delivers. */
export interface MerchantWebhooksInput {
  readonly merchantId: string;
}

/** What one delivery round did and when the next is due. */
export interface DeliveryRound {
  readonly delivered: number;
  readonly failed: number;
  /** Events were still due when the round's time ran out: start the next one at once. */
  readonly more: boolean;
  /** From now until the earliest pending event is due again; absent: nothing is pending. */
  readonly nextDueInMs?: number;
}

/** The delivery workflow of one merchant's events: `merchant-webhooks:<merchantId>` (merchant ids hold no colon). */
export const merchantWebhooksWorkflowId = (merchantId: string): string => `merchant-webhooks:${merchantId}`;

/**
 * The task queue of the merchant webhook deliveries, beside the payments' own (`<taskQueue>.merchant-webhooks`): a slow
 * endpoint holds slots of this queue only, never a payment's.
 */
export const merchantWebhooksTaskQueue = (taskQueue: string): string => `${taskQueue}.merchant-webhooks`;

/** Tells a merchant's delivery workflow that an event was queued (sent with signal-with-start). */
export const merchantWebhooksWakeSignal = defineSignal('merchantEventsQueued');

/** The delivery settings (config `MERCHANT_WEBHOOK_*`). */
export interface MerchantWebhookSettings {
  /** One POST, connect to the last byte of the answer. */
  readonly attemptTimeoutMs: number;
  /** Events of one merchant in flight at once (one merchant's delivery round holds one activity slot). */
  readonly concurrencyPerMerchant: number;
  /** The wait after a failed attempt: `initialMs` doubling up to `maxMs`, each drawn from its upper half. */
  readonly backoff: { readonly initialMs: number; readonly maxMs: number };
  /** How long an event is retried, counted from when it was queued; at least 3 days in production. */
  readonly retryForMs: number;
  /** How long one delivery round runs before its workflow starts the next (and may continue as new). */
  readonly roundBudgetMs: number;
}

const DAY = 86_400_000;

/** The production defaults. */
export const defaultMerchantWebhookSettings: MerchantWebhookSettings = {
  attemptTimeoutMs: 10_000,
  concurrencyPerMerchant: 4,
  backoff: { initialMs: 5_000, maxMs: 3_600_000 },
  retryForMs: 3 * DAY,
  roundBudgetMs: 20_000,
};

/** The shortest retry window production accepts (docs/http-api.md, "Webhooks to your endpoint": retried for at least 3 days). */
export const minimumRetryForMs = 3 * DAY;
