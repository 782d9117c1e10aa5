import { type ActivityOptions, condition, log, proxyActivities, uuid4 } from '@temporalio/workflow';
import type { MerchantWebhookActivities } from '../merchant-webhooks';
import { type MerchantEvent, type MerchantEventType, announcedStatuses } from '../domain/merchant-events';
import type { PaymentView } from '../domain/payment';
import { messageOf } from './failures';
import type { PaymentState } from './payment-state';

/** What a payment has announced to its merchant so far; carried in its state across continue-as-new. */
export interface AnnouncedEvents {
  /** The status the announcer last saw (announced when it is one of `announcedStatuses`). */
  status: string;
  /** The refunds announced, by key (one `payment.refunded` each). */
  refunds: string[];
}

/**
 * The handoff to the merchant's webhook queue: on the payment's own task queue (its workers always serve it), retried
 * for as long as an event is worth sending; the payment neither closes nor continues as new while one is out.
 */
const handOff = {
  startToCloseTimeout: '30 seconds',
  scheduleToCloseTimeout: '3 days',
  retry: { initialInterval: '1 second', maximumInterval: '1 minute', backoffCoefficient: 2 },
  summary: 'hand the event to the merchant’s webhook queue',
} satisfies ActivityOptions;

const { announcePaymentEvent } = proxyActivities<MerchantWebhookActivities>(handOff);

/** A payment's announcer, as its main line sees it. */
export interface MerchantEvents {
  /** Nothing left to announce and no handoff out: the payment may close or continue as new. */
  idle(): boolean;
}

const silent: MerchantEvents = { idle: () => true };

/**
 * Announces the payment's status changes and its succeeded refunds to its merchant (`merchantEvents` in the input, set
 * by the starter; absent, as in every history recorded before, nothing is announced and nothing is recorded). A watcher
 * compares the state with what it announced at every condition pass, so each event leaves in the workflow task whose
 * completion records what it announces (what `GET /v1/payments/:key` reads from then on), never from a query's early
 * view. The event's id and its payment view are made here once: every delivery carries the same.
 */
export function announceMerchantEvents(
  state: PaymentState,
  merchantId: string,
  enabled: boolean | undefined,
): MerchantEvents {
  if (enabled !== true) return silent;
  const announced = (state.announced ??= { status: state.view.status, refunds: [] });
  let handingOff = 0;
  const hasNews = () => state.view.status !== announced.status || unannouncedRefunds(state, announced).length > 0;

  const announce = () => {
    const events: MerchantEvent[] = [];
    if (state.view.status !== announced.status) {
      announced.status = state.view.status;
      if (announcedStatuses.has(announced.status)) events.push(eventOf(`payment.${announced.status}`, state.view));
    }
    for (const key of unannouncedRefunds(state, announced)) {
      announced.refunds.push(key);
      events.push(eventOf('payment.refunded', state.view));
    }
    for (const event of events) {
      handingOff += 1;
      void announcePaymentEvent({ merchantId, event, announcedAtMs: Date.now() })
        .catch((err: unknown) =>
          log.warn('a payment event could not be handed to its merchant’s webhook queue', {
            eventId: event.id,
            type: event.type,
            reason: messageOf(err),
          }),
        )
        .finally(() => {
          handingOff -= 1;
        });
    }
  };

  void (async () => {
    for (;;) {
      await condition(hasNews);
      announce();
    }
  })();
  return { idle: () => handingOff === 0 && !hasNews() };
}

/** The keys of the refunds that succeeded and were not announced yet, in the order they were requested. */
function unannouncedRefunds(state: PaymentState, announced: AnnouncedEvents): string[] {
  return state.subOperations
    .filter((o) => o.kind === 'refund' && o.state === 'done' && !announced.refunds.includes(o.key))
    .map((o) => o.key);
}

/** An event with a new id (deterministic: the workflow's own random source) and a copy of the view as it is now. */
function eventOf(type: string, view: PaymentView): MerchantEvent {
  return {
    id: `evt_${uuid4().replace(/-/g, '')}`,
    type: type as MerchantEventType,
    created: Math.floor(Date.now() / 1000),
    data: { payment: JSON.parse(JSON.stringify(view)) as PaymentView },
  };
}
