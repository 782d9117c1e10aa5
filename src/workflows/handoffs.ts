import { type ActivityOptions, condition, log } from '@temporalio/workflow';
import { messageOf } from './failures';

/**
 * A handoff's activity options: on the payment's own task queue (its workers always serve it), retried for as long as
 * what it hands over is worth having; the payment neither closes nor continues as new while one is out.
 */
export const handOff = {
  startToCloseTimeout: '30 seconds',
  scheduleToCloseTimeout: '3 days',
  retry: { initialInterval: '1 second', maximumInterval: '1 minute', backoffCoefficient: 2 },
} satisfies ActivityOptions;

/** One activity call to make, and what its warning names should it fail for good. */
export interface Handoff {
  readonly send: () => Promise<unknown>;
  readonly fields: Record<string, unknown>;
}

/** What a kind of handoff has to hand over: whether anything is new, and taking it (marks it handed over). */
export interface News<T> {
  readonly hasNews: () => boolean;
  readonly take: () => T[];
}

/** A payment's handoffs as its main line sees them. */
export interface Handoffs {
  /** Nothing left to hand over and no handoff out: the payment may close or continue as new. */
  idle(): boolean;
}

/** Handoffs that hand nothing over. */
export const noHandoffs: Handoffs = { idle: () => true };

/** All of `handoffs` idle. */
export const allHandoffs = (...handoffs: Handoffs[]): Handoffs => ({ idle: () => handoffs.every((h) => h.idle()) });

/**
 * Hands what the payment's state records over to activities: a watcher checks `hasNews` at every condition pass and
 * `take`s it (marking it taken), so each activity is scheduled in the workflow task whose completion records what it
 * hands over (what a query or `GET` reads from then on), never from a query's early view. A handoff that fails for
 * good is logged as `failed`: the payment's own outcome never waits on it beyond its retries.
 */
export function startHandoffs(hasNews: () => boolean, take: () => Handoff[], failed: string): Handoffs {
  let out = 0;
  void (async () => {
    for (;;) {
      await condition(hasNews);
      for (const { send, fields } of take()) {
        out += 1;
        void send()
          .catch((err: unknown) => log.warn(failed, { ...fields, reason: messageOf(err) }))
          .finally(() => {
            out -= 1;
          });
      }
    }
  })();
  return { idle: () => out === 0 && !hasNews() };
}
