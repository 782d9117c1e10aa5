/**
 * The payments' PostgreSQL as a process opens it. The worker and API processes do from `DATABASE_URL` (src/stack.ts,
 * which prunes by role); an order service does through the package's `payment-workflows/database` entry: it opens it
 * once, hands it to `createPaymentWorkers` (wallet activities, key-record handoffs) and to its `PaymentsClient`
 * ({@link PaymentDatabase.clientOptions}: wallet checks and wallet-only debits, key-record replays, order claims), and
 * closes it after both.
 */
import type pg from 'pg';
import { type Logger, pino } from 'pino';
import type { PaymentsClientOptions } from './client';
import { OrderClaims, openDatabase, startPeriodicPrune } from './db';
import { KeyRecords, defaultKeyRetentionDays, startKeyRecordPruner } from './key-records';
import { WalletLedger } from './wallets';

/** What {@link openPaymentDatabase} opens, and how. */
export interface PaymentDatabaseOptions {
  /** `postgres://user:password@host:5432/payments`: a database of its own, apart from Temporal's. */
  readonly url: string;
  /** Connections of this process's pool; default 10 (config `DATABASE_POOL_SIZE`). */
  readonly poolSize?: number;
  /** Every statement's upper bound, server-side; default 5 000 ms (config `DATABASE_STATEMENT_TIMEOUT_MS`). */
  readonly statementTimeoutMs?: number;
  /** How long a key answers its first answer (config `KEY_RETENTION_DAYS`); default 31 days. */
  readonly keyRetentionDays?: number;
  /** Names this process's connections in `pg_stat_activity`; default `payment-workflows`. */
  readonly applicationName?: string;
  /** How long to wait for a database that is not up yet (it may start beside the service); default 60 s. */
  readonly waitMs?: number;
  /**
   * Deletes expired key records and order claims now and then, in batches (several processes may: each row goes
   * once): each table every hour by default (config `KEY_RECORD_PRUNE_INTERVAL_MS` for key records). `false` for a
   * table another process prunes, or `prune: false` for both.
   */
  readonly prune?:
    { readonly keyRecordsEveryMs?: number | false; readonly orderClaimsEveryMs?: number | false } | false;
  /** Default: info-level pino logs tagged `component: payment-database`. */
  readonly logger?: Logger;
}

/** An open, migrated payments database and what the workers and the client use of it. */
export interface PaymentDatabase {
  /** The process's pool (pg), for the order service's own reads (a wallet's entries for finance, say). */
  readonly pool: pg.Pool;
  /** The migrations this open applied (none when another process had, or the schema was current). */
  readonly applied: readonly string[];
  /** Wallets and their entries: credit, balances and entries here; holds, captures and refunds by the payments. */
  readonly wallets: WalletLedger;
  /** Each key's first final answer, for `keyRetentionDays` whatever the namespace's retention. */
  readonly keyRecords: KeyRecords;
  /** One open payment per order across the order service's processes (`orderSingleFlight`). */
  readonly orderClaims: OrderClaims;
  /** Spread into `new PaymentsClient(client, { taskQueue, timings, ...database.clientOptions })`. */
  readonly clientOptions: Pick<PaymentsClientOptions, 'wallets' | 'keyRecords' | 'orderClaims'>;
  /** Stops the pruning and ends the pool; after the workers and the client are done with it. Idempotent. */
  close(): Promise<void>;
}

/** Default interval of the pruning of expired key records and order claims. */
const defaultPruneIntervalMs = 3_600_000;

/**
 * Opens the pool, applies the pending migrations (whichever process opens the database first does; the others find the
 * schema current), and starts the pruning its `prune` asks for. A database that does not answer within `waitMs`, or a
 * migration that fails, rejects with nothing left open.
 */
export async function openPaymentDatabase(options: PaymentDatabaseOptions): Promise<PaymentDatabase> {
  const logger = options.logger ?? pino({ base: { component: 'payment-database' } });
  const database = await openDatabase(
    {
      url: options.url,
      ...(options.poolSize === undefined ? {} : { poolSize: options.poolSize }),
      ...(options.statementTimeoutMs === undefined ? {} : { statementTimeoutMs: options.statementTimeoutMs }),
      applicationName: options.applicationName ?? 'payment-workflows',
    },
    logger,
    options.waitMs,
  );
  const wallets = new WalletLedger(database.pool);
  const keyRecords = new KeyRecords(database.pool, options.keyRetentionDays ?? defaultKeyRetentionDays);
  const orderClaims = new OrderClaims(database.pool);
  const prune: Exclude<PaymentDatabaseOptions['prune'], false> =
    options.prune === false ? { keyRecordsEveryMs: false, orderClaimsEveryMs: false } : options.prune;
  const keyRecordsEveryMs = prune?.keyRecordsEveryMs ?? defaultPruneIntervalMs;
  const orderClaimsEveryMs = prune?.orderClaimsEveryMs ?? defaultPruneIntervalMs;
  const pruners = [
    ...(keyRecordsEveryMs === false ? [] : [startKeyRecordPruner(keyRecords, logger, keyRecordsEveryMs)]),
    ...(orderClaimsEveryMs === false
      ? []
      : [startPeriodicPrune(() => orderClaims.prune(), logger, 'order claims', orderClaimsEveryMs)]),
  ];
  let closing: Promise<void> | undefined;
  return {
    pool: database.pool,
    applied: database.applied,
    wallets,
    keyRecords,
    orderClaims,
    clientOptions: { wallets, keyRecords, orderClaims },
    close: () =>
      (closing ??= (async () => {
        await Promise.all(pruners.map((p) => p.stop()));
        await database.close();
      })()),
  };
}
