import { proxyActivities, uuid4 } from '@temporalio/workflow';
import type { MerchantWebhookActivities } from '../merchant-webhooks';
import {
  type MerchantEvent,
  type MerchantEventType,
  type PaymentEventAnnouncement,
  announcedStatuses,
} from '../domain/merchant-events';
import type { PaymentView } from '../domain/payment';
import { type Handoffs, type News, handOff, startHandoffs } from './handoffs';
import type { AnnouncedEvents, PaymentState } from './payment-state';

export type { AnnouncedEvents } from './payment-state';

const { announcePaymentEvent } = proxyActivities<MerchantWebhookActivities>({
  ...handOff,
  summary: 'hand the event to the merchant’s webhook queue',
});

/**
 * The payment's status changes and its succeeded refunds to announce to its merchant (`merchantEvents` in the input,
 * set by the starter; absent, as in every history recorded before, nothing is announced and nothing is recorded:
 * undefined), each taken in the workflow task that records what it announces (handoffs.ts). The event's id and its
 * payment view are made when taken, once: every delivery carries the same.
 */
export function merchantEventNews(
  state: PaymentState,
  merchantId: string,
  enabled: boolean | undefined,
): News<PaymentEventAnnouncement> | undefined {
  if (enabled !== true) return undefined;
  const announced = (state.announced ??= { status: state.view.status, refunds: [] });
  const hasNews = () => state.view.status !== announced.status || unannouncedRefunds(state, announced).length > 0;

  const take = (): PaymentEventAnnouncement[] => {
    const events: MerchantEvent[] = [];
    if (state.view.status !== announced.status) {
      announced.status = state.view.status;
      if (announcedStatuses.has(announced.status)) events.push(eventOf(`payment.${announced.status}`, state.view));
    }
    for (const key of unannouncedRefunds(state, announced)) {
      announced.refunds.push(key);
      events.push(eventOf('payment.refunded', state.view));
    }
    return events.map((event) => ({ merchantId, event, announcedAtMs: Date.now() }));
  };
  return { hasNews, take };
}

/**
 * Each event in an activity of its own: without key records, or a run older than `handoffs-together`
 * (payment-news.ts).
 */
export function announceEach(news: News<PaymentEventAnnouncement>): Handoffs {
  return startHandoffs(
    news.hasNews,
    () =>
      news.take().map((announcement) => ({
        send: () => announcePaymentEvent(announcement),
        fields: { eventId: announcement.event.id, type: announcement.event.type },
      })),
    'a payment event could not be handed to its merchant’s webhook queue',
  );
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
