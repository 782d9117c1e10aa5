/** The wallet ledger on PostgreSQL (docs/architecture.md#where-balances-live). */
export * from './errors';
export * from './ledger';
export * from './observer';
export { defaultEntryPageSize } from './reads';
// The database failures the ledger's callers branch on (nothing applied / unknown), without importing src/db.
export { type DatabaseError, isDatabaseError } from '../db/errors';
