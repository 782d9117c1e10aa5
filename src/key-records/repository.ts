/**
 * Key records: a key's first terminal answer and its request's fingerprint, kept in PostgreSQL for KEY_RETENTION_DAYS
 * (default 31, Adyen's key lifetime) whatever the Temporal namespace's retention. The workflow id stays the in-flight
 * barrier; a record answers a repeat once the workflow is gone (the API replays it, or refuses another body with 422).
 */
import type pg from 'pg';
import { type Queryable, deleteInBatches, inTransaction, withConnection } from '../db';

/** How long a record answers by default (`KEY_RETENTION_DAYS`). */
export const defaultKeyRetentionDays = 31;

const dayMs = 86_400_000;

/** One recorded answer. */
export interface KeyRecord<View = unknown> {
  /** `<operation>:<merchantId>:<key>`, as the workflow id of the same intent. */
  readonly scope: string;
  readonly merchantId: string;
  readonly operation: string;
  readonly fingerprint: string;
  /** The answer's body as the API sent it. */
  readonly view: View;
  readonly recordedAt: Date;
  readonly expiresAt: Date;
}

/** What {@link KeyRecords.record} stores. */
export interface NewKeyRecord<View> {
  readonly merchantId: string;
  /** `charge`, `capture`, `refund`, ... */
  readonly operation: string;
  readonly key: string;
  readonly fingerprint: string;
  readonly view: View;
}

interface Row {
  scope: string;
  merchant_id: string;
  operation: string;
  fingerprint: string;
  view: unknown;
  recorded_at: Date;
  expires_at: Date;
}

const columns = 'scope, merchant_id, operation, fingerprint, view, recorded_at, expires_at';

const fromRow = <View>(r: Row): KeyRecord<View> => ({
  scope: r.scope,
  merchantId: r.merchant_id,
  operation: r.operation,
  fingerprint: r.fingerprint,
  view: r.view as View,
  recordedAt: r.recorded_at,
  expiresAt: r.expires_at,
});

/** The scope of a key: the same string as the workflow id of that intent. */
export const keyScope = (operation: string, merchantId: string, key: string): string =>
  `${operation}:${merchantId}:${key}`;

/** The key-record table of one database. */
export class KeyRecords {
  constructor(
    private readonly pool: pg.Pool,
    private readonly retentionDays: number = defaultKeyRetentionDays,
    private readonly now: () => number = Date.now,
  ) {}

  /**
   * Records a key's terminal answer unless one is recorded already: the first wins (a second terminal view of the same
   * key, e.g. a later status, never replaces what the key first answered). Answers the record that holds.
   */
  async record<View>(r: NewKeyRecord<View>): Promise<KeyRecord<View>> {
    const scope = keyScope(r.operation, r.merchantId, r.key);
    const recordedAt = new Date(this.now());
    const expiresAt = new Date(recordedAt.getTime() + this.retentionDays * dayMs);
    return inTransaction(this.pool, async (db) => {
      const { rows } = await db.query<Row>(
        `INSERT INTO key_records (${columns}) VALUES ($1, $2, $3, $4, $5, $6, $7)
         ON CONFLICT (scope) DO NOTHING RETURNING ${columns}`,
        [scope, r.merchantId, r.operation, r.fingerprint, JSON.stringify(r.view), recordedAt, expiresAt],
      );
      const inserted = rows[0];
      return inserted === undefined ? ((await this.read<View>(db, scope)) as KeyRecord<View>) : fromRow<View>(inserted);
    });
  }

  /** The live record of a key, or undefined (none, or expired and not yet pruned). */
  async find<View>(operation: string, merchantId: string, key: string): Promise<KeyRecord<View> | undefined> {
    const scope = keyScope(operation, merchantId, key);
    const found = await withConnection(this.pool, (db) => this.read<View>(db, scope));
    return found !== undefined && found.expiresAt.getTime() > this.now() ? found : undefined;
  }

  /**
   * Deletes expired records, `batchSize` rows per statement until none is left (short statements: no long lock, no
   * statement timeout); answers how many went.
   */
  prune(batchSize = 1_000): Promise<number> {
    return deleteInBatches(
      this.pool,
      `DELETE FROM key_records WHERE scope IN (
         SELECT scope FROM key_records WHERE expires_at <= $1 ORDER BY expires_at LIMIT $2)`,
      [new Date(this.now())],
      batchSize,
    );
  }

  private async read<View>(db: Queryable, scope: string): Promise<KeyRecord<View> | undefined> {
    const { rows } = await db.query<Row>(`SELECT ${columns} FROM key_records WHERE scope = $1`, [scope]);
    return rows[0] === undefined ? undefined : fromRow<View>(rows[0]);
  }
}
