/**
 * The merchants' event queue (PostgreSQL, `merchant_webhook_events`): one row per event a payment announced, with its
 * exact body, its attempts and when it is due again. A delivery round claims one due event at a time (a lease, so a
 * round whose worker died leaves it to the next once the lease passed), and records each attempt's outcome. Times are
 * the database's (`now()`), one clock for every worker.
 */
import type pg from 'pg';
import type { PaymentEventAnnouncement } from '../domain/merchant-events';
import { type Queryable, deleteInBatches, inTransaction, withConnection } from '../db';

/** An event claimed for one attempt, with the endpoint it goes to. */
export interface ClaimedEvent {
  readonly id: string;
  readonly merchantId: string;
  readonly type: string;
  readonly body: string;
  /** Attempts before this one. */
  readonly attempts: number;
  readonly createdAt: Date;
  readonly url: string;
  readonly secret: string;
}

/** How a failed attempt went, as recorded. */
export interface FailedAttempt {
  /** The HTTP status, when an answer came. */
  readonly status?: number;
  /** A word or two (`timeout`, `ECONNREFUSED`, `HTTP 503`): never the URL or a body. */
  readonly error: string;
}

/** One merchant's pending events, for the backlog metrics and the runbook. */
export interface MerchantBacklog {
  readonly merchantId: string;
  readonly pending: number;
  /** Seconds since the oldest pending event was announced. */
  readonly oldestPendingS: number;
}

/** One status's share of a merchant's events (`npm run webhooks -- status`). */
export interface MerchantEventSummary {
  readonly status: string;
  readonly events: number;
  readonly oldest: Date;
  readonly maxAttempts: number;
  readonly lastError?: string;
}

/** Which settled events to queue again (docs/operations.md, "Redelivering"). */
export interface RedeliveryFilter {
  readonly merchantId: string;
  /** Only this payment's events. */
  readonly paymentKey?: string;
  /** Only events announced at or after this time. */
  readonly since?: Date;
  /** Which statuses to queue again; default those that were never delivered (`failed`, `discarded`). */
  readonly statuses?: readonly ('delivered' | 'failed' | 'discarded')[];
}

const ms = (n: number) => String(Math.max(0, Math.round(n)));

/** The event queue of one database. */
export class MerchantEventOutbox {
  constructor(private readonly pool: pg.Pool) {}

  /**
   * Queues an announced event (once: a repeat of its id changes nothing) unless the merchant has no endpoint. `wake`:
   * this event found the merchant's wake flag unset and set it, so its caller wakes the merchant's delivery workflow;
   * while the flag is set, a wake is on its way and the round it starts claims this event too.
   */
  async queue(a: PaymentEventAnnouncement): Promise<{ readonly queued: boolean; readonly wake: boolean }> {
    return inTransaction(this.pool, async (db) => {
      const endpoint = await db.query('SELECT 1 FROM merchant_webhook_endpoints WHERE merchant_id = $1', [
        a.merchantId,
      ]);
      if (endpoint.rowCount === 0) return { queued: false, wake: false };
      const { event } = a;
      await db.query(
        `INSERT INTO merchant_webhook_events (id, merchant_id, payment_key, type, body, created_at, next_attempt_at)
         VALUES ($1, $2, $3, $4, $5, $6, now()) ON CONFLICT (id) DO NOTHING`,
        [event.id, a.merchantId, event.data.payment.key, event.type, JSON.stringify(event), new Date(a.announcedAtMs)],
      );
      return { queued: true, wake: await setWake(db, a.merchantId) };
    });
  }

  /**
   * A delivery round starts: an event queued from now on wakes the merchant's workflow again. Answers whether the
   * merchant has an endpoint now (one statement for both).
   */
  async startRound(merchantId: string): Promise<boolean> {
    const { rows } = await withConnection(this.pool, (db) =>
      db.query<{ endpoint: boolean }>(
        `WITH woken AS (UPDATE merchant_webhook_wakes SET pending = false WHERE merchant_id = $1 AND pending)
         SELECT EXISTS (SELECT 1 FROM merchant_webhook_endpoints WHERE merchant_id = $1) AS endpoint`,
        [merchantId],
      ),
    );
    return rows[0]?.endpoint === true;
  }

  /** The merchant removed its endpoint: its pending events are not sent (answers how many). */
  async discardPending(merchantId: string): Promise<number> {
    const { rowCount } = await withConnection(this.pool, (db) =>
      db.query(
        `UPDATE merchant_webhook_events SET status = 'discarded', leased_until = NULL
         WHERE merchant_id = $1 AND status = 'pending'`,
        [merchantId],
      ),
    );
    return rowCount ?? 0;
  }

  /**
   * Claims the merchant's `limit` most overdue events that no live round holds, for `leaseMs` (fewer, or none, when
   * fewer are due).
   */
  async claim(merchantId: string, leaseMs: number, limit = 1): Promise<ClaimedEvent[]> {
    const { rows } = await withConnection(this.pool, (db) =>
      db.query<{
        id: string;
        type: string;
        body: string;
        attempts: number;
        created_at: Date;
        url: string;
        secret: string;
      }>(
        `WITH claimed AS (
           UPDATE merchant_webhook_events SET leased_until = now() + ($2 || ' milliseconds')::interval
           WHERE id IN (
             SELECT id FROM merchant_webhook_events
             WHERE merchant_id = $1 AND status = 'pending' AND next_attempt_at <= now()
               AND (leased_until IS NULL OR leased_until <= now())
             ORDER BY next_attempt_at, created_at LIMIT $3
             FOR UPDATE SKIP LOCKED)
           RETURNING id, type, body, attempts, created_at, next_attempt_at)
         SELECT c.id, c.type, c.body, c.attempts, c.created_at, e.url, e.secret
         FROM claimed c JOIN merchant_webhook_endpoints e ON e.merchant_id = $1
         ORDER BY c.next_attempt_at, c.created_at`,
        [merchantId, ms(leaseMs), limit],
      ),
    );
    return rows.map((r) => ({
      id: r.id,
      merchantId,
      type: r.type,
      body: r.body,
      attempts: r.attempts,
      createdAt: r.created_at,
      url: r.url,
      secret: r.secret,
    }));
  }

  /** The endpoint answered 2xx. */
  async recordDelivered(id: string, status: number): Promise<void> {
    await withConnection(this.pool, (db) =>
      db.query(
        `UPDATE merchant_webhook_events SET status = 'delivered', attempts = attempts + 1, last_attempt_at = now(),
           delivered_at = now(), last_status = $2, last_error = NULL, leased_until = NULL
         WHERE id = $1`,
        [id, status],
      ),
    );
  }

  /**
   * An attempt failed: due again after `delayMs` (the last attempt falls exactly at the end of the retry window, which
   * counts from when the event was queued), or `failed` once the window is over. Answers which.
   */
  async recordFailed(
    id: string,
    attempt: FailedAttempt,
    delayMs: number,
    retryForMs: number,
  ): Promise<'pending' | 'failed'> {
    const { rows } = await withConnection(this.pool, (db) =>
      db.query<{ status: 'pending' | 'failed' }>(
        `UPDATE merchant_webhook_events SET
           attempts = attempts + 1, last_attempt_at = now(), last_status = $2, last_error = $3, leased_until = NULL,
           status = CASE WHEN queued_at + ($5 || ' milliseconds')::interval <= now() THEN 'failed' ELSE 'pending' END,
           next_attempt_at = LEAST(now() + ($4 || ' milliseconds')::interval,
                                   queued_at + ($5 || ' milliseconds')::interval)
         WHERE id = $1 AND status = 'pending' RETURNING status`,
        [id, attempt.status ?? null, attempt.error.slice(0, 200), ms(delayMs), ms(retryForMs)],
      ),
    );
    return rows[0]?.status ?? 'pending';
  }

  /** Makes the merchant's pending events due now (their endpoint is back: no wait for the backoff); answers how many. */
  async dueNow(merchantId: string): Promise<number> {
    const { rowCount } = await withConnection(this.pool, (db) =>
      db.query(
        `UPDATE merchant_webhook_events SET next_attempt_at = now()
         WHERE merchant_id = $1 AND status = 'pending' AND next_attempt_at > now()`,
        [merchantId],
      ),
    );
    return rowCount ?? 0;
  }

  /** One merchant's events by status: how many, the oldest, the most attempts, the last error seen. */
  async summary(merchantId: string): Promise<MerchantEventSummary[]> {
    const { rows } = await withConnection(this.pool, (db) =>
      db.query<{ status: string; events: number; oldest: Date; attempts: number; last_error: string | null }>(
        `SELECT status, count(*)::int AS events, min(created_at) AS oldest, max(attempts)::int AS attempts,
                (array_agg(last_error ORDER BY last_attempt_at DESC NULLS LAST))[1] AS last_error
         FROM merchant_webhook_events WHERE merchant_id = $1 GROUP BY status ORDER BY status`,
        [merchantId],
      ),
    );
    return rows.map((r) => ({
      status: r.status,
      events: r.events,
      oldest: r.oldest,
      maxAttempts: r.attempts,
      ...(r.last_error === null ? {} : { lastError: r.last_error }),
    }));
  }

  /** Milliseconds until the merchant's earliest pending event is due (a lease counts); undefined when none is pending. */
  async nextDueInMs(merchantId: string): Promise<number | undefined> {
    const { rows } = await withConnection(this.pool, (db) =>
      db.query<{ ms: string | null }>(
        `SELECT (EXTRACT(EPOCH FROM MIN(GREATEST(next_attempt_at, COALESCE(leased_until, next_attempt_at))) - now())
                 * 1000)::bigint AS ms
         FROM merchant_webhook_events WHERE merchant_id = $1 AND status = 'pending'`,
        [merchantId],
      ),
    );
    const due = rows[0]?.ms;
    return due === null || due === undefined ? undefined : Math.max(0, Number(due));
  }

  /** Every merchant with pending events: how many, and how old the oldest is. */
  async backlog(): Promise<MerchantBacklog[]> {
    const { rows } = await withConnection(this.pool, (db) =>
      db.query<{ merchant_id: string; pending: number; oldest_s: number }>(
        `SELECT merchant_id, count(*)::int AS pending,
                EXTRACT(EPOCH FROM now() - min(created_at))::float8 AS oldest_s
         FROM merchant_webhook_events WHERE status = 'pending' GROUP BY merchant_id`,
      ),
    );
    return rows.map((r) => ({ merchantId: r.merchant_id, pending: r.pending, oldestPendingS: r.oldest_s }));
  }

  /**
   * Queues settled events again, due now, with a fresh retry window (`queued_at` is now; attempts and `created_at`
   * kept); answers how many. The caller wakes the merchant's delivery workflow when any were.
   */
  async redeliver(filter: RedeliveryFilter): Promise<number> {
    const statuses = filter.statuses ?? ['failed', 'discarded'];
    return inTransaction(this.pool, async (db) => {
      const { rowCount } = await db.query(
        `UPDATE merchant_webhook_events SET status = 'pending', next_attempt_at = now(), leased_until = NULL,
           queued_at = now()
         WHERE merchant_id = $1 AND status = ANY($2::text[])
           AND ($3::text IS NULL OR payment_key = $3) AND ($4::timestamptz IS NULL OR created_at >= $4)`,
        [filter.merchantId, statuses, filter.paymentKey ?? null, filter.since ?? null],
      );
      if ((rowCount ?? 0) > 0) await setWake(db, filter.merchantId);
      return rowCount ?? 0;
    });
  }

  /** Deletes settled events queued before `before`, `batchSize` rows per statement; answers how many went. */
  prune(before: Date, batchSize = 1_000): Promise<number> {
    return deleteInBatches(
      this.pool,
      `DELETE FROM merchant_webhook_events WHERE id IN (
         SELECT id FROM merchant_webhook_events WHERE status <> 'pending' AND queued_at < $1 LIMIT $2)`,
      [before],
      batchSize,
    );
  }
}

/** Sets the merchant's wake flag; true when it was unset (the caller then wakes the delivery workflow). */
async function setWake(db: Queryable, merchantId: string): Promise<boolean> {
  const { rowCount } = await db.query(
    `INSERT INTO merchant_webhook_wakes (merchant_id, pending) VALUES ($1, true)
     ON CONFLICT (merchant_id) DO UPDATE SET pending = true WHERE NOT merchant_webhook_wakes.pending`,
    [merchantId],
  );
  return (rowCount ?? 0) > 0;
}
