export * from './errors';
export * from './money';
export * from './payment';
export * from './retry';
export * from './ids';
export * from './definitions';
export * from './search-attributes';
export * from './workflow-inputs';
export * from './operations';
export * from './provider-payment';
// Explicit: the schemas (values) win over definitions.ts, which re-exports only their types.
export { ProviderEvent, ProviderPayment } from './provider-payment';
