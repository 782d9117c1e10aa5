/**
 * Order claims (migration 0007): which key is being started for an order, shared by every API process on one
 * database, so one open payment per order holds across processes (src/client/order-guard.ts). A claim is the
 * serialization point only while a start may not be visible yet; visibility says which payments are open after that.
 * Each write is one statement (its own transaction); a failure is a classified `DatabaseError` (the API answers 503,
 * and the same key's repeat claims again: a claim is its key's whatever an earlier, lost answer did).
 */
import type pg from 'pg';
import type { OrderClaim, OrderClaimStore } from '../domain/order-claims';
import { deleteInBatches } from './periodic-prune';
import { inStatement } from './transaction';

/** A claim answers for an hour at most (far beyond any start window); older rows are pruned. */
const pruneAfter = "interval '1 hour'";

/** The order-claim table of one database. */
export class OrderClaims implements OrderClaimStore {
  constructor(private readonly pool: pg.Pool) {}

  /**
   * Claims the order for `paymentKey` when no claim younger than `windowMs` is another key's, in one statement;
   * answers the claim that holds. Undefined when a concurrent claim committed after this statement began (ask again).
   */
  async claim(
    merchantId: string,
    orderId: string,
    paymentKey: string,
    windowMs: number,
  ): Promise<OrderClaim | undefined> {
    const { rows } = await inStatement(this.pool, (db) =>
      db.query<{ payment_key: string; claimed_at: string; ours: boolean }>(
        `WITH claimed AS (
           INSERT INTO order_claims (merchant_id, order_id, payment_key) VALUES ($1, $2, $3)
           ON CONFLICT (merchant_id, order_id) DO UPDATE SET payment_key = EXCLUDED.payment_key, claimed_at = now()
             WHERE order_claims.payment_key = EXCLUDED.payment_key
                OR order_claims.claimed_at < now() - $4::double precision * interval '1 millisecond'
           RETURNING payment_key, claimed_at
         )
         SELECT payment_key, claimed_at::text AS claimed_at, true AS ours FROM claimed
         UNION ALL
         SELECT payment_key, claimed_at::text, false FROM order_claims
          WHERE merchant_id = $1 AND order_id = $2 AND NOT EXISTS (SELECT 1 FROM claimed)`,
        [merchantId, orderId, paymentKey, windowMs],
      ),
    );
    const row = rows[0];
    return row === undefined ? undefined : { paymentKey: row.payment_key, claimedAt: row.claimed_at, ours: row.ours };
  }

  /**
   * Takes the order over from `from` (a payment found settled) if its claim is still exactly that one; answers the new
   * claim, or undefined when another took it first.
   */
  async takeOver(
    merchantId: string,
    orderId: string,
    paymentKey: string,
    from: OrderClaim,
  ): Promise<OrderClaim | undefined> {
    const { rows } = await inStatement(this.pool, (db) =>
      db.query<{ claimed_at: string }>(
        `UPDATE order_claims SET payment_key = $3, claimed_at = now()
          WHERE merchant_id = $1 AND order_id = $2 AND payment_key = $4 AND claimed_at = $5::timestamptz
          RETURNING claimed_at::text AS claimed_at`,
        [merchantId, orderId, paymentKey, from.paymentKey, from.claimedAt],
      ),
    );
    const row = rows[0];
    return row === undefined ? undefined : { paymentKey, claimedAt: row.claimed_at, ours: true };
  }

  /**
   * Gives the order up if `claim` (this request's) still holds it: a repeat of the same key that claimed it since, in
   * another process, keeps its own.
   */
  async release(merchantId: string, orderId: string, claim: OrderClaim): Promise<void> {
    await inStatement(this.pool, (db) =>
      db.query(
        `DELETE FROM order_claims
          WHERE merchant_id = $1 AND order_id = $2 AND payment_key = $3 AND claimed_at = $4::timestamptz`,
        [merchantId, orderId, claim.paymentKey, claim.claimedAt],
      ),
    );
  }

  /** Deletes claims older than an hour, `batchSize` rows per statement; answers how many went. */
  prune(batchSize = 1_000): Promise<number> {
    return deleteInBatches(
      this.pool,
      `DELETE FROM order_claims WHERE (merchant_id, order_id) IN (
         SELECT merchant_id, order_id FROM order_claims WHERE claimed_at < now() - ${pruneAfter}
          ORDER BY claimed_at LIMIT $1)`,
      [],
      batchSize,
    );
  }
}
