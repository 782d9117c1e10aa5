/**
 * Webhooks to the merchant (docs/http-api.md, "Webhooks to your endpoint") on PostgreSQL: the endpoint table, the event queue, signing, one POST,
 * and the activities a payment's handoff and the per-merchant delivery workflow run.
 */
export * from './activities';
export * from './delivery';
export * from './endpoints';
export * from './outbox';
export * from './pruner';
export * from './settings';
export * from './signature';
