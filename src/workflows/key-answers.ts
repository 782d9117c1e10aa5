import { proxyActivities } from '@temporalio/workflow';
import type { KeyRecordActivities } from '../activities/key-records';
import type { KeyAnswer } from '../domain/key-records';
import type { PaymentView } from '../domain/payment';
import type { ChargeWorkflowInput } from '../domain/workflow-inputs';
import { type Handoffs, type News, handOff, startHandoffs } from './handoffs';
import type { PaymentState, SubOperation } from './payment-state';

const { recordKeyAnswer } = proxyActivities<KeyRecordActivities>({
  ...handOff,
  summary: 'keep the key’s first answer for KEY_RETENTION_DAYS',
});

/** The charge's own entry in {@link PaymentState.keysRecorded}; a capture's or refund's is `<kind>:<key>`. */
const chargeEntry = 'charge';

/**
 * Each of the payment's keys to hand to the key-record table once it first answered for good (`keyRecords` in the
 * input, set by a starter that reads the table; absent, as in every history recorded before, nothing is handed over:
 * undefined): the charge's first answer, each capture's and refund's success or refusal. A repeat of the key answers
 * the record once the workflow is gone (deleted, or past the namespace retention): docs/operations.md#key-records.
 */
export function keyAnswerNews(state: PaymentState, input: ChargeWorkflowInput): News<KeyAnswer> | undefined {
  if (input.keyRecords !== true) return undefined;
  const recorded = (state.keysRecorded ??= []);
  const news = (): KeyAnswer[] => {
    const answers: KeyAnswer[] = [];
    const { merchantId, key, fingerprint } = input;
    if (state.firstAnswer && !recorded.includes(chargeEntry)) {
      answers.push({ merchantId, operation: 'charge', key, fingerprint, view: state.firstAnswer });
    }
    for (const op of state.subOperations) {
      if (op.kind === 'void' || recorded.includes(`${op.kind}:${op.key}`)) continue;
      const view = finalAnswerOf(op, state.view);
      if (view) answers.push({ merchantId, operation: op.kind, key: op.key, fingerprint: op.fingerprint, view });
    }
    return answers;
  };
  const take = (): KeyAnswer[] =>
    news().map((answer) => {
      recorded.push(answer.operation === 'charge' ? chargeEntry : `${answer.operation}:${answer.key}`);
      return answer;
    });
  return { hasNews: () => news().length > 0, take };
}

/**
 * Each answer in an activity of its own: without merchant events, or a run older than `handoffs-together`
 * (payment-news.ts).
 */
export function recordEach(news: News<KeyAnswer>): Handoffs {
  return startHandoffs(
    news.hasNews,
    () =>
      news.take().map((answer) => ({ send: () => recordKeyAnswer(answer), fields: { operation: answer.operation } })),
    'a key’s first answer could not be recorded',
  );
}

/**
 * What a capture's or refund's key answers for good: the view when it succeeded, or, refused by the provider, the view
 * that shows the refusal (the client answers it 422 `provider_rejected`). A try that never left, or one in review, is
 * not final: the same key may still answer otherwise.
 */
function finalAnswerOf(op: SubOperation, view: PaymentView): PaymentView | undefined {
  if (op.state === 'done') return op.answer ?? undefined;
  const shown = view.operations?.find((o) => o.kind === op.kind && o.key === op.key);
  if (op.state === 'rejected' && shown?.state === 'rejected') return JSON.parse(JSON.stringify(view)) as PaymentView;
  return undefined;
}
