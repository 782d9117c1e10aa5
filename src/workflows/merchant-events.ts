import { proxyActivities, uuid4 } from '@temporalio/workflow';
import type { MerchantWebhookActivities } from '../merchant-webhooks';
import { type MerchantEvent, type MerchantEventType, announcedStatuses } from '../domain/merchant-events';
import type { PaymentView } from '../domain/payment';
import { type Handoff, type Handoffs, handOff, noHandoffs, startHandoffs } from './handoffs';
import type { AnnouncedEvents, PaymentState } from './payment-state';

export type { AnnouncedEvents } from './payment-state';

const { announcePaymentEvent } = proxyActivities<MerchantWebhookActivities>({
  ...handOff,
  summary: 'hand the event to the merchant’s webhook queue',
});

/**
 * Announces the payment's status changes and its succeeded refunds to its merchant (`merchantEvents` in the input, set
 * by the starter; absent, as in every history recorded before, nothing is announced and nothing is recorded), each in
 * the workflow task that records what it announces (handoffs.ts). The event's id and its payment view are made here
 * once: every delivery carries the same.
 */
export function announceMerchantEvents(
  state: PaymentState,
  merchantId: string,
  enabled: boolean | undefined,
): Handoffs {
  if (enabled !== true) return noHandoffs;
  const announced = (state.announced ??= { status: state.view.status, refunds: [] });
  const hasNews = () => state.view.status !== announced.status || unannouncedRefunds(state, announced).length > 0;

  const announce = (): Handoff[] => {
    const events: MerchantEvent[] = [];
    if (state.view.status !== announced.status) {
      announced.status = state.view.status;
      if (announcedStatuses.has(announced.status)) events.push(eventOf(`payment.${announced.status}`, state.view));
    }
    for (const key of unannouncedRefunds(state, announced)) {
      announced.refunds.push(key);
      events.push(eventOf('payment.refunded', state.view));
    }
    return events.map((event) => ({
      send: () => announcePaymentEvent({ merchantId, event, announcedAtMs: Date.now() }),
      fields: { eventId: event.id, type: event.type },
    }));
  };
  return startHandoffs(hasNews, announce, 'a payment event could not be handed to its merchant’s webhook queue');
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
