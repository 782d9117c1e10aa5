export * from './errors';
export * from './money';
export * from './payment';
export * from './retry';
export * from './ids';
export * from './definitions';
// Explicit: the schemas (values), where definitions.ts re-exports only their types.
export { ProviderEvent, ProviderPaymentState } from './provider-event';
export * from './search-attributes';
export * from './workflow-inputs';
export * from './operations';
