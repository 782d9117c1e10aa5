/**
 * The one activity a payment hands a status change's news over in (src/workflows/payment-news.ts): the change's
 * merchant events and its keys' first answers together, one activity task (and one workflow task to hear it back)
 * where each kind had its own. Each part is the kind's own activity, idempotent as before (an event is queued once per
 * id, a key's first answer wins), so a retry redoes both without doubling either.
 */
import type { KeyAnswer } from '../domain/key-records';
import type { AnnouncementOutcome, PaymentEventAnnouncement } from '../domain/merchant-events';
import type { KeyRecordActivities } from './key-records';

/** A status change's news: the events it announces, the key answers it records. */
export interface PaymentNews {
  readonly events: readonly PaymentEventAnnouncement[];
  readonly keyAnswers: readonly KeyAnswer[];
}

/** What a key answer's handoff did (key-records.ts). */
type KeyAnswerOutcome = Awaited<ReturnType<KeyRecordActivities['recordKeyAnswer']>>;

/** What each part did, in the input's order. */
export interface PaymentNewsOutcome {
  readonly events: readonly AnnouncementOutcome[];
  readonly keyAnswers: readonly KeyAnswerOutcome[];
}

/** The kinds' own handoffs, as every payment worker registers them. */
export interface NewsHandoffs extends Pick<KeyRecordActivities, 'recordKeyAnswer'> {
  announcePaymentEvent(announcement: PaymentEventAnnouncement): Promise<AnnouncementOutcome>;
}

/** Builds it over the kinds' own handoffs. */
export function createHandoffActivities(handoffs: NewsHandoffs) {
  return {
    /**
     * Hands every part over at once; each is tried even when another fails, and the activity fails (Temporal retries
     * it, the payment's handoff options) if any did, naming each failure.
     */
    async handOverPaymentNews(news: PaymentNews): Promise<PaymentNewsOutcome> {
      const [events, keyAnswers] = await Promise.all([
        Promise.allSettled(news.events.map((e) => handoffs.announcePaymentEvent(e))),
        Promise.allSettled(news.keyAnswers.map((a) => handoffs.recordKeyAnswer(a))),
      ]);
      const failures = [
        ...failed(events, (i) => `event ${news.events[i]?.event.id}`),
        ...failed(keyAnswers, (i) => `the ${news.keyAnswers[i]?.operation} key's answer`),
      ];
      if (failures.length > 0) throw new Error(`payment news not all handed over: ${failures.join('; ')}`);
      return {
        events: events.map((r) => (r as PromiseFulfilledResult<AnnouncementOutcome>).value),
        keyAnswers: keyAnswers.map((r) => (r as PromiseFulfilledResult<KeyAnswerOutcome>).value),
      };
    },
  };
}

/** `what: why` of each rejected part. */
function failed(results: readonly PromiseSettledResult<unknown>[], what: (i: number) => string): string[] {
  return results.flatMap((r, i) =>
    r.status === 'rejected' ? [`${what(i)}: ${r.reason instanceof Error ? r.reason.message : String(r.reason)}`] : [],
  );
}

export type HandoffActivities = ReturnType<typeof createHandoffActivities>;
