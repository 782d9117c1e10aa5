/**
 * A FIFO mutex for workflow code: update handlers run concurrently, and capture/refund must see and change the
 * payment one at a time (the Temporal form of SELECT ... FOR UPDATE). Deterministic: plain promise chaining.
 */
export class Lock {
  private tail: Promise<unknown> = Promise.resolve();

  /** Runs `fn` after every earlier `run` has settled. */
  run<T>(fn: () => Promise<T>): Promise<T> {
    const result = this.tail.then(fn);
    this.tail = result.catch(() => undefined);
    return result;
  }
}
