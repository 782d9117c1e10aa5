/** The tests' one bounded poller: waits on the event a test needs instead of a fixed sleep. */

/** What a probe may answer: a value when the awaited thing happened, a falsy value (or a throw) while it has not. */
export type Probe<T> = () => T | undefined | false | null | Promise<T | undefined | false | null>;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const shown = (last: unknown): string => {
  if (last instanceof Error) return String(last);
  try {
    return JSON.stringify(last) ?? String(last);
  } catch {
    return String(last);
  }
};

/**
 * Polls `probe` every `intervalMs` until it answers a truthy value and resolves that value; after `timeoutMs` throws
 * naming `what` and the last answer (or error) seen. A probe that throws is polled again: servers and workflows a test
 * waits on may not exist yet.
 */
export async function eventually<T>(what: string, probe: Probe<T>, timeoutMs = 15_000, intervalMs = 50): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      last = await probe();
      if (last) return last as T;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) throw new Error(`${what} did not happen within ${timeoutMs} ms; last: ${shown(last)}`);
    await sleep(intervalMs);
  }
}
