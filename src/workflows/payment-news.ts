import { patched, proxyActivities } from '@temporalio/workflow';
import type { HandoffActivities, PaymentNews } from '../activities/handoffs';
import type { ChargeWorkflowInput } from '../domain/workflow-inputs';
import { type Handoff, type Handoffs, allHandoffs, handOff, noHandoffs, startHandoffs } from './handoffs';
import { keyAnswerNews, recordEach } from './key-answers';
import { announceEach, merchantEventNews } from './merchant-events';
import { PATCHES } from './patches';
import type { PaymentState } from './payment-state';

/**
 * Patch: a payment with both kinds of news (merchant events and key records) hands a change's news over in one
 * activity, `handOverPaymentNews` (one activity task and one workflow task fewer per change). Older runs scheduled an
 * activity per event and per key answer.
 */
const HANDOFFS_TOGETHER = PATCHES.handoffsTogether.id;

const { handOverPaymentNews } = proxyActivities<HandoffActivities>({
  ...handOff,
  summary: 'hand the change’s events to the merchant’s webhook queue and keep its keys’ first answers',
});

/**
 * The payment's news handoffs: its merchant events (merchant-events.ts) and its keys' first answers
 * (key-answers.ts), each only when its input flag is set. With both, one activity per change carries what the change
 * made of each; a run whose history predates that, or with one kind only, hands each item over in its own activity.
 */
export function handOverNews(state: PaymentState, input: ChargeWorkflowInput): Handoffs {
  const events = merchantEventNews(state, input.merchantId, input.merchantEvents);
  const keys = keyAnswerNews(state, input);
  if (events && keys && patched(HANDOFFS_TOGETHER)) {
    const take = (): Handoff[] => {
      const news: PaymentNews = { events: events.take(), keyAnswers: keys.take() };
      if (news.events.length === 0 && news.keyAnswers.length === 0) return [];
      const fields = {
        eventIds: news.events.map((e) => e.event.id),
        operations: news.keyAnswers.map((a) => a.operation),
      };
      return [{ send: () => handOverPaymentNews(news), fields }];
    };
    return startHandoffs(
      () => events.hasNews() || keys.hasNews(),
      take,
      'a payment’s news (its events, its keys’ first answers) could not be handed over',
    );
  }
  return allHandoffs(events ? announceEach(events) : noHandoffs, keys ? recordEach(keys) : noHandoffs);
}
