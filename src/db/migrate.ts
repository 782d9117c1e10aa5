/**
 * Versioned SQL migrations (`src/db/migrations/NNNN_name.sql`), applied at start by umzug: every pending file in order,
 * all of them in one transaction under an advisory lock, so processes starting together (two workers, an API) apply
 * each once and a failed file leaves the schema as it was. An applied file whose text changed since stops the start
 * (its checksum is recorded): a migration is never edited, a new one is added.
 */
import { createHash } from 'node:crypto';
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import type pg from 'pg';
import type { UmzugStorage } from 'umzug';
import { inTransaction, type Queryable } from './transaction';

/** Where the migration files are (beside this module, in src/ and in the built dist/). */
export const migrationsDir = path.join(__dirname, 'migrations');

/** Any fixed number: the key of the advisory lock that serializes migration runs. */
const MIGRATION_LOCK = 7_300_231_001;

interface MigrationFile {
  readonly name: string;
  readonly sql: string;
  readonly checksum: string;
}

/** The migration files, in order. */
export function migrationFiles(dir: string = migrationsDir): MigrationFile[] {
  return readdirSync(dir)
    .filter((f) => /^\d{4}_[a-z0-9_]+\.sql$/.test(f))
    .sort()
    .map((f) => {
      const sql = readFileSync(path.join(dir, f), 'utf8');
      return { name: f.replace(/\.sql$/, ''), sql, checksum: createHash('sha256').update(sql).digest('hex') };
    });
}

/** The table of applied migrations, kept by umzug through this storage. */
function storage(files: readonly MigrationFile[]): UmzugStorage<Queryable> {
  return {
    async executed({ context }) {
      const { rows } = await context.query<{ name: string }>('SELECT name FROM schema_migrations ORDER BY name');
      return rows.map((r) => r.name);
    },
    async logMigration({ name, context }) {
      const file = files.find((m) => m.name === name);
      await context.query('INSERT INTO schema_migrations (name, checksum) VALUES ($1, $2)', [name, file?.checksum]);
    },
    async unlogMigration({ name, context }) {
      await context.query('DELETE FROM schema_migrations WHERE name = $1', [name]);
    },
  };
}

/** Applies every pending migration; answers the names applied now (none when the schema was current). */
export async function migrate(pool: pg.Pool, dir: string = migrationsDir): Promise<string[]> {
  const files = migrationFiles(dir);
  return inTransaction(pool, async (client) => {
    await client.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK]);
    await client.query(`CREATE TABLE IF NOT EXISTS schema_migrations (
      name text PRIMARY KEY, checksum text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`);
    const { rows } = await client.query<{ name: string; checksum: string }>(
      'SELECT name, checksum FROM schema_migrations',
    );
    for (const applied of rows) {
      const file = files.find((f) => f.name === applied.name);
      if (file !== undefined && file.checksum !== applied.checksum) {
        throw new Error(`migration ${applied.name} changed after it was applied: add a new migration instead`);
      }
    }
    // Loaded here, not with the module: umzug brings its CLI along (@rushstack/ts-command-line and its file-system and
    // JSON-schema libraries): about a tenth of the CPU of loading src/stack, paid by every process and test file that
    // imports it, most of which never migrate a database.
    const { Umzug } = await import('umzug');
    const umzug = new Umzug<Queryable>({
      migrations: files.map((f) => ({
        name: f.name,
        path: path.join(dir, `${f.name}.sql`),
        up: async ({ context }) => context.query(f.sql),
      })),
      context: client,
      storage: storage(files),
      logger: undefined,
    });
    const done = await umzug.up();
    return done.map((m) => m.name);
  });
}
