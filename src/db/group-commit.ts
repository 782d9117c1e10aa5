/**
 * Group commit per key: steps that lock the same row (one wallet) and arrive while a transaction of that row is in
 * flight wait for it, then run together in the next transaction, one after the other, each inside its own savepoint,
 * and commit once. A hot wallet then pays one commit (its WAL flush, which holds the row lock) per batch instead of one
 * per step: without it every hold of a wallet waited for the flush of the one before, and one wallet took a third of
 * what the same load spread over many took (bench/wallets.ts).
 *
 * Each step keeps the answer it would have had alone: a refusal of its own (or a statement the server refused) rolls
 * back to its savepoint and fails that step only, as `inTransaction` would have failed it; its successors run on what
 * the steps before them wrote. A connection that breaks, or a COMMIT that fails, fails every step of the batch that had
 * not refused by itself, classified as `inTransaction` classifies it (nothing applied, or unknown at the COMMIT). A step
 * alone runs exactly as `inTransaction` runs it, without a savepoint.
 */
import pg from 'pg';
import { classifyDatabaseError, isDriverError } from './errors';
import { type Queryable, inStatement, inTransaction } from './transaction';

/**
 * At most this many steps share one transaction (a queue longer than that is served in several): enough to pay one
 * commit for a pool's worth of steps, few enough that another process waiting for the same row gets its turn soon
 * (with 64, one API process took all 50 holds a wallet covered while a second one waited).
 */
export const GROUP_COMMIT_MAX_BATCH = 16;

/** How a step runs. */
export interface StepOptions {
  /**
   * The step is one statement that is a transaction by itself (e.g. a function that locks, reads and writes): alone
   * it runs without BEGIN and COMMIT (src/db/transaction.ts `inStatement`); in a batch, in its savepoint as any step.
   */
  readonly statement?: boolean;
}

interface Pending {
  readonly work: (db: Queryable) => Promise<unknown>;
  readonly statement: boolean;
  readonly resolve: (value: unknown) => void;
  readonly reject: (err: unknown) => void;
}

type Outcome = { readonly ok: true; readonly value: unknown } | { readonly ok: false; readonly error: unknown };

/** One per pool: steps of one key in this process are grouped, whichever ledger object runs them. */
const committers = new WeakMap<pg.Pool, GroupCommit>();

export class GroupCommit {
  /** Keys with a transaction in flight, and the steps waiting for the next one. */
  readonly #waiting = new Map<string, Pending[]>();

  private constructor(
    private readonly pool: pg.Pool,
    private readonly maxBatch: number,
  ) {}

  /** The pool's group commit (created on first use). */
  static of(pool: pg.Pool): GroupCommit {
    let committer = committers.get(pool);
    if (committer === undefined) {
      committer = new GroupCommit(pool, GROUP_COMMIT_MAX_BATCH);
      committers.set(pool, committer);
    }
    return committer;
  }

  /** Runs `work` in a transaction shared with the other steps of `key` that wait at the same time. */
  run<T>(key: string, work: (db: Queryable) => Promise<T>, options: StepOptions = {}): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const step: Pending = {
        work,
        statement: options.statement === true,
        resolve: resolve as (value: unknown) => void,
        reject,
      };
      const waiting = this.#waiting.get(key);
      if (waiting !== undefined) {
        waiting.push(step);
        return;
      }
      this.#waiting.set(key, []);
      void this.#drain(key, [step]);
    });
  }

  async #drain(key: string, first: Pending[]): Promise<void> {
    for (let batch = first; batch.length > 0;) {
      await this.#commit(batch);
      batch = (this.#waiting.get(key) as Pending[]).splice(0, this.maxBatch);
    }
    this.#waiting.delete(key);
  }

  /** One transaction for `batch`; settles every step's promise, never throws. */
  async #commit(batch: readonly Pending[]): Promise<void> {
    if (batch.length === 1) {
      const [step] = batch as [Pending];
      await (step.statement ? inStatement : inTransaction)(this.pool, step.work).then(step.resolve, step.reject);
      return;
    }
    const outcomes: Outcome[] = [];
    try {
      await inTransaction(this.pool, async (db) => {
        for (const step of batch) outcomes.push(await runInSavepoint(db, step));
      });
    } catch (err) {
      // Nothing committed, or the COMMIT's answer was lost: a step that refused by itself keeps its refusal.
      batch.forEach((step, i) => {
        const own = outcomes[i];
        step.reject(own !== undefined && !own.ok ? own.error : err);
      });
      return;
    }
    batch.forEach((step, i) => {
      const outcome = outcomes[i] as Outcome;
      if (outcome.ok) step.resolve(outcome.value);
      else step.reject(outcome.error);
    });
  }
}

/**
 * One step of a batch: its refusal, or a statement the server refused, rolls back to its savepoint and is its answer
 * alone. A broken connection (or a savepoint that cannot be rolled back to) throws: the batch ends there.
 */
async function runInSavepoint(db: Queryable, step: Pending): Promise<Outcome> {
  await db.query('SAVEPOINT group_step');
  try {
    const value = await step.work(db);
    await db.query('RELEASE SAVEPOINT group_step');
    return { ok: true, value };
  } catch (err) {
    const serverRefused = err instanceof pg.DatabaseError;
    if (isDriverError(err) && !serverRefused) throw err;
    await db.query('ROLLBACK TO SAVEPOINT group_step');
    return { ok: false, error: serverRefused ? classifyDatabaseError(err, 'before_commit') : err };
  }
}
