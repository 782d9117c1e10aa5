/** The wallet ledger on PostgreSQL (docs/architecture.md#where-balances-live). */
export * from './errors';
export * from './ledger';
export * from './observer';
export { defaultEntryPageSize } from './reads';
