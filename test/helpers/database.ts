/**
 * A database per test file in the run's PostgreSQL server (jest global setup), migrated by the code under test, as a
 * process does at start (`openDatabase`).
 */
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import pino from 'pino';
import { type Database, openDatabase } from '../../src/db';

/** Env var through which the global setup hands the server's admin URL (database `postgres`) to the test workers. */
export const TEST_POSTGRES_ENV = 'PW_TEST_POSTGRES_URL';

/** The admin URL of the run's server. */
export function testPostgresUrl(): string {
  const url = process.env[TEST_POSTGRES_ENV];
  if (!url) throw new Error(`${TEST_POSTGRES_ENV} is not set: run the tests through jest (global setup)`);
  return url;
}

/** A fresh, empty database of its own; `drop()` removes it (connections still open are ended). */
export async function createTestDatabase(): Promise<{ readonly url: string; drop(): Promise<void> }> {
  const admin = testPostgresUrl();
  const name = `t_${randomUUID().replace(/-/g, '').slice(0, 20)}`;
  await withAdmin(admin, (c) => c.query(`CREATE DATABASE ${name}`));
  const url = new URL(admin);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    drop: () => withAdmin(admin, (c) => c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)).then(() => undefined),
  };
}

/** A fresh database, opened (pool, migrations) as a process opens it. */
export async function openTestDatabase(
  settings: { readonly poolSize?: number; readonly statementTimeoutMs?: number } = {},
): Promise<Database & { readonly url: string; drop(): Promise<void> }> {
  const created = await createTestDatabase();
  const db = await openDatabase({ url: created.url, ...settings }, pino({ level: 'silent' }));
  return {
    ...db,
    url: created.url,
    drop: async () => {
      await db.close().catch(() => undefined);
      await created.drop();
    },
  };
}

async function withAdmin<T>(url: string, work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}
