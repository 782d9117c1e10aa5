import { condition, continueAsNew, setHandler, upsertSearchAttributes, workflowInfo } from '@temporalio/workflow';
import { type ProviderEvent, webhookSignal } from '../domain/definitions';
import { type ParkedEventInput, type ParkedEvents, maxParkedEvents, parkedEventsQuery } from '../domain/parked-events';
import { MerchantIdAttr, OrderIdAttr, PaymentStatusAttr, ProviderAttr } from '../domain/search-attributes';
import { pushBounded } from './payment-state';

/**
 * Keeps provider events that matched no open payment (id `provider-event:<provider>:<providerPaymentId>`), so the
 * webhook can be acknowledged without losing what it reported. Events are deduplicated by id. The workflow shows
 * `PaymentStatus = needs_review` on purpose: money moved at the provider that no payment of ours accounts for, and
 * operators already watch that filter in the web UI. Merchant lists never show it (they select `chargeWorkflow` only).
 * It completes after `retainMs` without a new event; its history keeps the events for the namespace's retention.
 */
export async function parkedProviderEventWorkflow(
  input: ParkedEventInput,
  carried?: readonly ProviderEvent[],
): Promise<ParkedEvents> {
  const events: ProviderEvent[] = [...(carried ?? [])];
  let received = 0;

  setHandler(parkedEventsQuery, () => ({ input, events }));
  setHandler(webhookSignal, (event) => {
    received += 1;
    if (events.some((e) => e.eventId === event.eventId)) return;
    pushBounded(events, event, maxParkedEvents);
  });

  upsertSearchAttributes([
    { key: PaymentStatusAttr, value: 'needs_review' },
    { key: ProviderAttr, value: input.provider },
    { key: OrderIdAttr, value: input.reference },
    ...(input.merchantId === undefined ? [] : [{ key: MerchantIdAttr, value: input.merchantId }]),
  ]);

  for (;;) {
    const seen = received;
    const quiet = !(await condition(() => received !== seen || workflowInfo().continueAsNewSuggested, input.retainMs));
    if (quiet) return { input, events };
    if (workflowInfo().continueAsNewSuggested) {
      await continueAsNew<typeof parkedProviderEventWorkflow>(input, events);
    }
  }
}
