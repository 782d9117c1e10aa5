export {
  PaymentsClient,
  type ChargeResult,
  type ListOptions,
  type OperationResult,
  type PaymentPage,
  type PaymentsClientOptions,
} from './payments-client';
export type { OperatorReviewItemView, ReviewItemListOptions, ReviewItemPage } from './review-items';
export * from './errors';
export { captureFingerprint, chargeFingerprint, refundFingerprint } from './fingerprint';
export type { EventOwner, ProviderEventDelivery } from './provider-events';
export { isTemporalUnavailable } from './failures';
