/**
 * How the client reads a charge's first answer (src/client/charge-answers.ts `firstAnswer`) from the `firstAnswer`
 * query, against a scripted handle (what a worker answers is the workflow tests' to show): the recorded answer once
 * settled; progress (pending, unknown) as it is; and an answered status whose answer is not recorded yet, which the
 * cluster soak saw (a split payment's wallet part still `held` in its task while the key recorded it settled), never
 * as the answer: the caller then answers 202.
 */
import type { ClientContext } from '../../src/client/context';
import { firstAnswer } from '../../src/client/charge-answers';
import type { PaymentView } from '../../src/domain/payment';
import { firstAnswerDue, initialState } from '../../src/workflows/payment-state';

type Answer = { settled: boolean; view: PaymentView; replay?: PaymentView };

const view = (status: PaymentView['status'], wallet: 'held' | 'captured'): PaymentView =>
  ({
    key: 'k1',
    merchantId: 'm1',
    orderId: 'o1',
    status,
    amount: { value: 1_500, currency: 'EUR' },
    wallet: { walletId: 'w1', amount: 400, status: wallet, refunded: 0 },
  }) as unknown as PaymentView;

/** A context whose charge handle answers the query from `script` (its last answer repeated), counting the reads. */
function scripted(script: Answer[]): { ctx: ClientContext; reads: () => number } {
  let reads = 0;
  const handle = {
    query: async () => script[Math.min(reads++, script.length - 1)],
  };
  const ctx = {
    client: {
      connection: { withDeadline: (_deadline: number, fn: () => Promise<unknown>) => fn() },
      workflow: { getHandle: () => handle },
    },
    namespace: 'default',
    rpcTimeoutMs: 1_000,
  } as unknown as ClientContext;
  return { ctx, reads: () => reads };
}

const window: Answer = { settled: false, view: view('succeeded', 'held') };
const recorded: Answer = { settled: true, view: view('succeeded', 'captured'), replay: view('succeeded', 'captured') };

it('answers the recorded first answer once the payment says it is settled, reading through the window', async () => {
  const { ctx, reads } = scripted([window, window, recorded]);
  expect(await firstAnswer(ctx, 'charge:m1:k1', Date.now() + 2_000)).toEqual(recorded.replay);
  expect(reads()).toBe(3);
});

it('never answers an answered status whose answer is not recorded yet: nothing (the caller answers 202)', async () => {
  const { ctx } = scripted([window]);
  expect(await firstAnswer(ctx, 'charge:m1:k1', Date.now() + 300)).toBeUndefined();
});

it('answers progress as it is when the deadline comes first (pending: a 202 either way)', async () => {
  const pending: Answer = { settled: false, view: view('pending', 'held') };
  const { ctx } = scripted([pending]);
  expect(await firstAnswer(ctx, 'charge:m1:k1', Date.now() + 300)).toEqual(pending.view);
});

it('the workflow says settled only once the answer its key replays is recorded', () => {
  const state = initialState(
    {
      merchantId: 'm1',
      key: 'k1',
      fingerprint: 'f1',
      request: { orderId: 'o1', amount: { value: 1_500, currency: 'EUR' }, provider: 'simulator' },
    },
    '2026-12-04T00:00:00.000Z',
  );
  state.firstCallSettled = true;
  state.view.status = 'succeeded';
  expect(firstAnswerDue(state)).toBe(true);
  state.firstAnswer = JSON.parse(JSON.stringify(state.view)) as PaymentView;
  expect(firstAnswerDue(state)).toBe(false);
  // Runs from before the answer was recorded have none to wait for.
  const older = { ...state, firstAnswer: undefined };
  expect(firstAnswerDue(older)).toBe(false);
});
