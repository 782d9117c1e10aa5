/** `payment-workflows/domain`: payment schemas and types, statuses, error types, ids, timings, Temporal definitions. */
export * from '../domain';
