export * from './adapter';
export * from './webhook';
export { CreatedPaymentSchema, ProviderPaymentListSchema, ProviderPaymentSchema, ProviderRefundSchema } from './wire';
