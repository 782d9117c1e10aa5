/**
 * Merchants' webhook endpoints (PostgreSQL, `merchant_webhook_endpoints`): one per merchant, its URL and signing
 * secret. A PUT replaces both URL and secret; the secret is answered once, on the PUT, and read again only by the
 * deliveries (the outbox's claim joins it), so an event is always signed with the secret current when it is sent.
 */
import type pg from 'pg';
import { inTransaction, withConnection } from '../db';
import { newEndpointSecret } from './signature';

/** An endpoint as `PUT` answers it. */
export interface EndpointWithSecret {
  readonly url: string;
  readonly secret: string;
}

/** The endpoint table of one database. */
export class WebhookEndpoints {
  constructor(
    private readonly pool: pg.Pool,
    private readonly newSecret: () => string = newEndpointSecret,
  ) {}

  /** Sets the merchant's endpoint to `url` with a new secret (the previous secret signs nothing from now on). */
  async put(merchantId: string, url: string): Promise<EndpointWithSecret> {
    const secret = this.newSecret();
    await inTransaction(this.pool, (db) =>
      db.query(
        `INSERT INTO merchant_webhook_endpoints (merchant_id, url, secret) VALUES ($1, $2, $3)
         ON CONFLICT (merchant_id) DO UPDATE SET url = EXCLUDED.url, secret = EXCLUDED.secret, updated_at = now()`,
        [merchantId, url, secret],
      ),
    );
    return { url, secret };
  }

  /** The merchant's endpoint URL, or undefined when it has none. */
  async get(merchantId: string): Promise<{ readonly url: string } | undefined> {
    const { rows } = await withConnection(this.pool, (db) =>
      db.query<{ url: string }>('SELECT url FROM merchant_webhook_endpoints WHERE merchant_id = $1', [merchantId]),
    );
    return rows[0] === undefined ? undefined : { url: rows[0].url };
  }

  /** Removes the merchant's endpoint (nothing is sent from now on; events still queued are discarded). */
  async delete(merchantId: string): Promise<void> {
    await inTransaction(this.pool, (db) =>
      db.query('DELETE FROM merchant_webhook_endpoints WHERE merchant_id = $1', [merchantId]),
    );
  }
}
