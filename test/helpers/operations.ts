/**
 * Helpers for tests of captures, refunds and voids: a payment's own operation by key, waiting for one to reach a
 * state, and retry settings that make an operation's outcome unknown within seconds.
 */
import { paymentQuery } from '../../src/domain/definitions';
import type { PaymentView } from '../../src/domain/payment';
import type { RetryOverrides } from '../../src/domain/retry';
import { eventually } from './eventually';

/** A refund that keeps failing with a 500: its outcome is unknown once this short budget is spent (two attempts). */
export const unknownRefundRetry: RetryOverrides = {
  refund: {
    initialIntervalMs: 100,
    maximumIntervalMs: 200,
    attemptTimeoutMs: 7_000,
    budgetMs: 10_000,
    maximumAttempts: 2,
  },
};

/** One operation of the payment by kind and key, as its view shows it. */
export const opOf = (view: PaymentView, kind: string, key: string) =>
  view.operations?.find((o) => o.kind === kind && o.key === key);

/** Polls until one operation reaches a state (real time, bounded): its reconcile runs activities over real HTTP. */
export const waitForOperation = (
  handle: { query: (q: typeof paymentQuery) => Promise<PaymentView> },
  kind: string,
  key: string,
  state: string,
  timeoutMs = 15_000,
): Promise<PaymentView> =>
  eventually(
    `${kind} ${key} reaching ${state}`,
    async () => {
      const view = await handle.query(paymentQuery);
      // Thrown, not answered false: the timeout's message names the last view.
      if (opOf(view, kind, key)?.state !== state) throw new Error(`view ${JSON.stringify(view)}`);
      return view;
    },
    timeoutMs,
    100,
  );

/** Fails the test instead of hanging when an update holds its answer. */
export const within = <T>(ms: number, p: Promise<T>, what: string): Promise<T> =>
  Promise.race([
    p,
    new Promise<T>((_, reject) => setTimeout(() => reject(new Error(`${what} did not answer within ${ms} ms`)), ms)),
  ]);
