export { PaymentsClient, type PaymentsClientOptions } from './payments-client';
export type { ChargeResult } from './charge-answers';
export type { OperationResult } from './money-requests';
export type { ListOptions, PaymentPage } from './reads';
export type { OperatorReviewItemView, ReviewItemListOptions, ReviewItemPage } from './review-items';
export * from './errors';
export { captureFingerprint, chargeFingerprint, refundFingerprint } from './fingerprint';
export type { EventOwner, ProviderEventDelivery } from './provider-events';
export { isTemporalUnavailable } from './failures';
