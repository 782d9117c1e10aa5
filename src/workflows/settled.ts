import { condition } from '@temporalio/workflow';

/**
 * Resolves at the next condition pass that follows everything the current activation has set off so far. The SDK runs
 * an activation's jobs synchronously, then their continuations (microtasks), then a condition pass, then what that
 * pass woke, and so on. `condition()` evaluates its function at once (a condition that holds already is no pass), so
 * the one registered here is false at first: it is registered past the jobs (after one microtask) and holds from its
 * next evaluation on, which is that pass.
 */
export async function nextConditionPass(): Promise<void> {
  await Promise.resolve();
  let evaluated = false;
  await condition(() => {
    const pass = evaluated;
    evaluated = true;
    return pass;
  });
}

/**
 * Resolves once `ready` held at two condition passes in a row, the first one after every job of the current
 * activation ran its continuations: the first pass closes the chains those jobs started (a result applied, the main
 * line at its next wait), the second what the first one woke (e.g. `submit` answering once the first call settled).
 * What a handler does after this comes after all of that, whether the worker delivered its message in the same
 * activation as a result (replay, or a first execution without the split) or after it (a query applied the result
 * early: docs/sdk-update-ordering.md), so its commands come in the same order both times.
 */
export async function whenSettled(ready: () => boolean = () => true): Promise<void> {
  for (let passes = 0; passes < 2;) {
    await nextConditionPass();
    if (ready()) {
      passes += 1;
    } else {
      passes = 0;
      await condition(ready);
    }
  }
}
