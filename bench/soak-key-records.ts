/**
 * The soak's key-record verdict (issue 23 §4): after quiescence every key that answered for good has its record in the
 * payments database's `key_records`, handed over by its payment (with merchant webhooks on, in the one
 * `handOverPaymentNews` activity per workflow task) through the soak's worker kills, PostgreSQL and Temporal restarts.
 * Which keys: each payment's charge whose final view shows an answered status, each capture and refund that view shows
 * succeeded. The model test holds its payments to the same (test/model/invariants.ts). A record is read by its scope
 * (`<operation>:<merchantId>:<key>`, the table's primary key); a handoff still retrying (its backoff reaches a minute)
 * gets a bounded wait.
 */
import type pg from 'pg';
import { settledStatuses } from '../src/domain/payment';

/** A payment as its harness last read it: whose, its key, its final view (undefined or an error: not read). */
export interface AnsweredPayment {
  readonly merchantId: string;
  readonly key: string;
  readonly view:
    | {
        readonly status: string;
        readonly operations?: readonly { readonly kind: string; readonly key: string; readonly state: string }[];
      }
    | { readonly error: string }
    | undefined;
}

/** The statuses a charge's key answers for good: the API's 200s (the workflow records the first of them). */
const answered: ReadonlySet<string> = new Set(settledStatuses);

/**
 * The scopes expected recorded: the charge of every payment whose final view shows an answered status (a view not read
 * is the harness's to count as stuck), and every capture and refund that view shows succeeded.
 */
export function expectedKeyScopes(payments: readonly AnsweredPayment[]): string[] {
  const charges: string[] = [];
  const operations: string[] = [];
  for (const { merchantId, key, view } of payments) {
    if (view === undefined || 'error' in view || !answered.has(view.status)) continue;
    charges.push(`charge:${merchantId}:${key}`);
    for (const op of view.operations ?? []) {
      if ((op.kind === 'capture' || op.kind === 'refund') && op.state === 'succeeded') {
        operations.push(`${op.kind}:${merchantId}:${op.key}`);
      }
    }
  }
  return [...charges, ...operations];
}

/** The scopes of `expected` that have no record yet, read until none is missing or `waitMs` passed. */
export async function missingKeyRecords(
  db: Pick<pg.Pool, 'query'>,
  expected: readonly string[],
  waitMs: number,
): Promise<string[]> {
  const deadline = Date.now() + waitMs;
  let missing = [...expected];
  for (;;) {
    const { rows } = await db.query<{ scope: string }>('SELECT scope FROM key_records WHERE scope = ANY($1)', [
      missing,
    ]);
    const found = new Set(rows.map((r) => r.scope));
    missing = missing.filter((s) => !found.has(s));
    if (missing.length === 0 || Date.now() > deadline) return missing;
    await new Promise((r) => setTimeout(r, 1_000));
  }
}
