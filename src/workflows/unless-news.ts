import { type CancellationScope, condition } from '@temporalio/workflow';

/** What {@link unlessNews} answers when the payment learnt the answer before the reconcile did. */
export const NEWS: unique symbol = Symbol('news');

/**
 * A reconcile child's result, unless provider news the payment applied (a webhook, a look-up of its own) answers the
 * child's question first: then the child's scope is cancelled and {@link NEWS} is answered. Without this a webhook
 * that arrived before the child had started (its signal to the child fails) left the child checking on its schedule,
 * and through a provider outage that is until the key's lifetime ends (hours), with the operation `running` and the
 * payment's main line waiting. A child that ends first answers as always (its failure is thrown).
 */
export async function unlessNews<T>(
  scope: CancellationScope,
  running: Promise<T>,
  answered: () => boolean,
  ending?: (ended: Promise<unknown>) => void,
): Promise<T | typeof NEWS> {
  let ended = false;
  const settled = running.finally(() => {
    ended = true;
  });
  // The condition also ends once the child did, so no wait is left behind.
  const news = condition(() => ended || answered()).then((): typeof NEWS => NEWS);
  const winner: T | typeof NEWS = await Promise.race([settled, news]);
  if (winner !== NEWS) return winner;
  if (ended) return settled;
  scope.cancel();
  // The cancelled child's failure is what was asked for; it is still ending, and the payment is told so.
  settled.catch(() => undefined);
  ending?.(settled);
  return NEWS;
}
