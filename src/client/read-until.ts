import { setTimeout as sleep } from 'node:timers/promises';

/** The pauses between reads: from `firstMs`, doubling up to `maxMs`. */
export interface ReadPauses {
  readonly firstMs: number;
  readonly maxMs: number;
}

/** Reads of a workflow's answer by query: the pause grows from 10 to 200 ms. */
const queryPauses: ReadPauses = { firstMs: 10, maxMs: 200 };

/**
 * Reads `read` until `done` holds for its answer or `answerBy` passed, and answers the last read: how the client waits
 * for a workflow (by query: nothing goes into its history) or for visibility to list one. It never sleeps past
 * `answerBy`: the last read is the one after which the next pause would.
 */
export async function readUntil<T>(
  read: () => Promise<T>,
  done: (answer: T) => boolean,
  answerBy: number,
  pauses: ReadPauses = queryPauses,
): Promise<T> {
  for (let pauseMs = pauses.firstMs; ; pauseMs = Math.min(pauseMs * 2, pauses.maxMs)) {
    const answer = await read();
    if (done(answer) || Date.now() + pauseMs > answerBy) return answer;
    await sleep(pauseMs);
  }
}
