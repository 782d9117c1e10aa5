import { log, patched, proxyActivities, proxyLocalActivities } from '@temporalio/workflow';
import type { HandoffActivities, PaymentNews } from '../activities/handoffs';
import type { ChargeWorkflowInput } from '../domain/workflow-inputs';
import { type Handoff, type Handoffs, allHandoffs, handOff, noHandoffs, startHandoffs } from './handoffs';
import { keyAnswerNews, recordEach } from './key-answers';
import { announceEach, merchantEventNews } from './merchant-events';
import { messageOf } from './failures';
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
 * Patch: news that any retry of its task decides the same (a wallet-only payment's debit decided by the ledger:
 * PaymentEntity.newsReproducible, said only when {@link newsInTaskPatched} held) is handed over by a local activity
 * inside that task: no activity task, and no second workflow task to hear it back. A task that never completes is run
 * again and hands the same news over again (an event is queued once per id, a key's first answer wins), so nothing
 * handed over differs from what history records. Older runs, and all other news, go by the activity, scheduled by the
 * completion of the task that made them.
 */
const NEWS_IN_TASK = PATCHES.walletNewsInTask.id;

/**
 * Whether this run may hand news over inside its task (the patch's marker). Asked before the local activity whose
 * decision makes the news reproducible, never after it: a replay resolves a local activity from its marker in the
 * task that recorded it, which may be a task before the one whose code first saw its result (a result that came in
 * while its task was being completed), and a patch asked there would be asked before its marker's task is replayed
 * (the SDK learns a task's patches when that task's history is replayed): false, and another path than recorded.
 */
export const newsInTaskPatched = (): boolean => patched(NEWS_IN_TASK);

const { handOverPaymentNews: handOverInTask } = proxyLocalActivities<HandoffActivities>({
  // A short budget inside the task: past it (PostgreSQL slow or away) the activity takes over with its own retries.
  startToCloseTimeout: '5 seconds',
  scheduleToCloseTimeout: '10 seconds',
  retry: { initialInterval: '200 milliseconds', maximumInterval: '2 seconds', backoffCoefficient: 2 },
  summary: 'hand the wallet-only payment’s decided news over in its first task: its event, its key’s first answer',
});

/**
 * The payment's news handoffs: its merchant events (merchant-events.ts) and its keys' first answers
 * (key-answers.ts), each only when its input flag is set. With both, one activity per change carries what the change
 * made of each (inside the task when `reproducible` says a retry of the task would hand the same over); a run whose
 * history predates that, or with one kind only, hands each item over in its own activity.
 */
export function handOverNews(
  state: PaymentState,
  input: ChargeWorkflowInput,
  reproducible: () => boolean = () => false,
): Handoffs {
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
      if (!reproducible()) return [{ send: () => handOverPaymentNews(news), fields }];
      const send = () =>
        handOverInTask(news).catch((err: unknown) => {
          log.warn('a payment’s news could not be handed over in its task; an activity hands it over', {
            ...fields,
            reason: messageOf(err),
          });
          return handOverPaymentNews(news);
        });
      return [{ send, fields }];
    };
    return startHandoffs(
      () => events.hasNews() || keys.hasNews(),
      take,
      'a payment’s news (its events, its keys’ first answers) could not be handed over',
    );
  }
  return allHandoffs(events ? announceEach(events) : noHandoffs, keys ? recordEach(keys) : noHandoffs);
}
