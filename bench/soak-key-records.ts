/**
 * The soak's key-record verdict (issue 23 §4): after quiescence every key that answered for good has its record in
 * the payments database's `key_records`, handed over by its payment (with merchant webhooks on, in the one
 * `handOverPaymentNews` activity per workflow task) through the soak's worker kills, PostgreSQL and Temporal restarts.
 * Which keys: each charge that was not refused (it started a payment, which settled), each capture and refund that its
 * payment's final view shows succeeded. A record is read by its scope (`<operation>:<merchantId>:<key>`, the table's
 * primary key); a handoff still retrying (its backoff reaches a minute) gets a bounded wait.
 */
import pg from 'pg';
import type { SoakView } from './soak-check';

/** The scopes the soak expects recorded: every charge it did not see refused, every succeeded capture and refund. */
export function expectedKeyScopes(
  merchantId: string,
  charges: readonly string[],
  views: ReadonlyMap<string, SoakView>,
): string[] {
  const scopes = charges.map((key) => `charge:${merchantId}:${key}`);
  for (const key of charges) {
    const view = views.get(key);
    if (view === undefined || 'error' in view) continue;
    for (const op of view.operations ?? []) {
      if ((op.kind === 'capture' || op.kind === 'refund') && op.state === 'succeeded') {
        scopes.push(`${op.kind}:${merchantId}:${op.key}`);
      }
    }
  }
  return scopes;
}

/** The scopes of `expected` that have no record yet, read until none is missing or `waitMs` passed. */
export async function missingKeyRecords(
  databaseUrl: string,
  expected: readonly string[],
  waitMs: number,
): Promise<string[]> {
  const pool = new pg.Pool({ connectionString: databaseUrl, max: 1 });
  const deadline = Date.now() + waitMs;
  try {
    let missing = [...expected];
    for (;;) {
      const { rows } = await pool.query<{ scope: string }>('SELECT scope FROM key_records WHERE scope = ANY($1)', [
        missing,
      ]);
      const found = new Set(rows.map((r) => r.scope));
      missing = missing.filter((s) => !found.has(s));
      if (missing.length === 0 || Date.now() > deadline) return missing;
      await new Promise((r) => setTimeout(r, 2_000));
    }
  } finally {
    await pool.end();
  }
}
