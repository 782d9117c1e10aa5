/**
 * The merchant webhook activities. `announcePaymentEvent` runs on the payments' workflow task queue (a payment's
 * handoff never waits for a webhook worker): it queues the event in PostgreSQL and wakes the merchant's delivery
 * workflow. `deliverDueMerchantEvents` runs on the webhook task queue: one round of one merchant's deliveries, at most
 * `concurrencyPerMerchant` POSTs at once, in one activity slot, so a slow merchant holds one slot whatever its backlog.
 */
import { Context } from '@temporalio/activity';
import type { Client } from '@temporalio/client';
import {
  type AnnouncementOutcome,
  type DeliveryRound,
  type MerchantWebhooksInput,
  type PaymentEventAnnouncement,
  merchantWebhooksTaskQueue,
  merchantWebhooksWakeSignal,
  merchantWebhooksWorkflowId,
} from '../domain/merchant-events';
import { postEvent, type AttemptResult } from './delivery';
import type { ClaimedEvent, MerchantEventOutbox } from './outbox';
import { type MerchantWebhookSettings, leaseMarginMs, retryDelayMs } from './settings';

/** What the metrics hear (src/metrics/merchant-webhook-metrics.ts). */
export interface MerchantWebhookObserver {
  /** A payment's event handed over: queued, or dropped for want of an endpoint. */
  onAnnounced(outcome: AnnouncementOutcome): void;
  /** One POST: `delivered`, `http_3xx`/`http_4xx`/`http_5xx`, `timeout` or `unreachable`. */
  onAttempt(outcome: string): void;
  /** An event delivered, `lagMs` after its payment announced it. */
  onDelivered(lagMs: number): void;
  /** Events that will not be sent: retried for the whole window (`gave_up`), or their endpoint was removed. */
  onAbandoned(outcome: 'gave_up' | 'discarded', count: number): void;
}

/** Where the activities log (pino's shape). */
export interface MerchantWebhookLog {
  info(fields: object, message: string): void;
  warn(fields: object, message: string): void;
}

/** What the activities are built from. */
export interface MerchantWebhookDeps {
  readonly outbox: MerchantEventOutbox;
  /** Starts and wakes the delivery workflows (the workers' own client). */
  readonly client: Client;
  readonly settings: MerchantWebhookSettings;
  readonly logger: MerchantWebhookLog;
  readonly observer?: MerchantWebhookObserver;
  readonly random?: () => number;
}

/** The delivery workflow's type name (started by name: activities import no workflow code). */
export const merchantWebhooksWorkflowType = 'merchantWebhooksWorkflow';

/**
 * Wakes (or starts) the merchant's delivery workflow on the webhook queue beside the payments' `taskQueue`: its next
 * round claims whatever is due (the handoff, and an operator's redelivery, call it).
 */
export async function wakeMerchantDeliveries(client: Client, merchantId: string, taskQueue: string): Promise<void> {
  await client.workflow.signalWithStart(merchantWebhooksWorkflowType, {
    workflowId: merchantWebhooksWorkflowId(merchantId),
    taskQueue: merchantWebhooksTaskQueue(taskQueue),
    args: [{ merchantId } satisfies MerchantWebhooksInput],
    signal: merchantWebhooksWakeSignal,
    signalArgs: [],
  });
}

/** Builds the activities. */
export function createMerchantWebhookActivities(deps: MerchantWebhookDeps) {
  const { outbox, client, settings, logger } = deps;
  const observer = deps.observer;
  const wake = (merchantId: string, taskQueue: string) => wakeMerchantDeliveries(client, merchantId, taskQueue);

  /** One POST of a claimed event, and its outcome recorded; true when delivered. */
  async function attempt(event: ClaimedEvent): Promise<boolean> {
    const result = await postEvent(event.url, event.secret, event.body, event.id, settings.attemptTimeoutMs);
    observer?.onAttempt(attemptOutcome(result));
    if (result.kind === 'delivered') {
      await outbox.recordDelivered(event.id, result.status);
      observer?.onDelivered(Date.now() - event.createdAt.getTime());
      return true;
    }
    const retryAfter = result.kind === 'refused' ? result.retryAfterMs : undefined;
    const delayMs = retryDelayMs(event.attempts + 1, settings.backoff, deps.random, retryAfter);
    const failure =
      result.kind === 'refused' ? { status: result.status, error: `HTTP ${result.status}` } : { error: result.error };
    const after = await outbox.recordFailed(event.id, failure, delayMs, settings.retryForMs);
    const fields = { merchantId: event.merchantId, eventId: event.id, attempts: event.attempts + 1, ...failure };
    if (after === 'failed') {
      observer?.onAbandoned('gave_up', 1);
      logger.warn(fields, 'merchant webhook given up after its retry window');
    } else {
      logger.info({ ...fields, retryInMs: delayMs }, 'merchant webhook attempt failed');
    }
    return false;
  }

  return {
    /**
     * Hands a payment's event to its merchant's queue (once per event id) and wakes the merchant's delivery workflow
     * when no wake is on its way. A retry of this activity wakes it anyway: the attempt before may have queued the
     * event and set the flag, then died before it woke anyone.
     */
    async announcePaymentEvent(announcement: PaymentEventAnnouncement): Promise<AnnouncementOutcome> {
      const { info } = Context.current();
      const { queued, wake: mustWake } = await outbox.queue(announcement);
      if (!queued) {
        observer?.onAnnounced('no_endpoint');
        return 'no_endpoint';
      }
      if (mustWake || info.attempt > 1) await wake(announcement.merchantId, info.taskQueue);
      observer?.onAnnounced('queued');
      return 'queued';
    },

    /**
     * One delivery round of one merchant: claims up to `concurrencyPerMerchant` due events at once and POSTs each in a
     * lane of its own; a lane that finished claims the next, until none is due or the round's time is up (`more`:
     * start the next round at once). A merchant without an endpoint has its pending events discarded. Heartbeats
     * throughout: a round whose worker died is retried by Temporal, and its claimed events go to the next round once
     * their lease passed.
     */
    async deliverDueMerchantEvents({ merchantId }: MerchantWebhooksInput): Promise<DeliveryRound> {
      const ctx = Context.current();
      const beat = setInterval(() => ctx.heartbeat(), 1_000);
      try {
        if (!(await outbox.startRound(merchantId))) {
          const discarded = await outbox.discardPending(merchantId);
          if (discarded > 0) {
            observer?.onAbandoned('discarded', discarded);
            logger.info({ merchantId, discarded }, 'merchant has no webhook endpoint: its pending events discarded');
          }
          return { delivered: 0, failed: 0, more: false };
        }
        const deadline = Date.now() + settings.roundBudgetMs;
        const leaseMs = settings.attemptTimeoutMs + leaseMarginMs;
        let delivered = 0;
        let failed = 0;
        let more = false;
        // Once a claim comes back short, nothing else is due: the lanes finish what they hold. (An event queued since
        // the round started woke the workflow again: the next round takes it.)
        let drained = false;
        const lane = async (first: ClaimedEvent) => {
          for (let event: ClaimedEvent | undefined = first; event !== undefined;) {
            if (await attempt(event)) delivered += 1;
            else failed += 1;
            if (drained) return;
            if (Date.now() >= deadline || ctx.cancellationSignal.aborted) {
              more = true;
              return;
            }
            [event] = await outbox.claim(merchantId, leaseMs);
            if (event === undefined) drained = true;
          }
        };
        const firsts = await outbox.claim(merchantId, leaseMs, settings.concurrencyPerMerchant);
        drained = firsts.length < settings.concurrencyPerMerchant;
        await Promise.all(firsts.map(lane));
        if (more) return { delivered, failed, more };
        const nextDueInMs = await outbox.nextDueInMs(merchantId);
        return { delivered, failed, more, ...(nextDueInMs === undefined ? {} : { nextDueInMs }) };
      } finally {
        clearInterval(beat);
      }
    },
  };
}

/** The activities' type, for the workflows' proxies. */
export type MerchantWebhookActivities = ReturnType<typeof createMerchantWebhookActivities>;

/**
 * The handoff of a worker without merchant webhooks (no database, or `MERCHANT_WEBHOOKS=false`): every payment worker
 * registers one, so a payment that announces never waits on a worker that cannot queue; it answers `disabled`.
 */
export const disabledMerchantWebhookActivities: Pick<MerchantWebhookActivities, 'announcePaymentEvent'> = {
  announcePaymentEvent: async () => 'disabled',
};

/** The attempt's outcome as the metrics count it. */
function attemptOutcome(result: AttemptResult): string {
  if (result.kind === 'delivered') return 'delivered';
  if (result.kind === 'refused') return `http_${Math.floor(result.status / 100)}xx`;
  return result.error === 'timeout' ? 'timeout' : 'unreachable';
}
