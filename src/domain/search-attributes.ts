import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';

/** The payment's current status; the web UI and `PaymentsClient.list` filter on it. */
export const PaymentStatusAttr = defineSearchAttributeKey('PaymentStatus', SearchAttributeType.KEYWORD);
/** The merchant that owns the payment: every list is scoped by it. */
export const MerchantIdAttr = defineSearchAttributeKey('MerchantId', SearchAttributeType.KEYWORD);
/** The order service's order id (not customer data: an opaque reference). */
export const OrderIdAttr = defineSearchAttributeKey('OrderId', SearchAttributeType.KEYWORD);
/** The provider name, e.g. `simulator`. */
export const ProviderAttr = defineSearchAttributeKey('Provider', SearchAttributeType.KEYWORD);

/**
 * When the payment became `unknown`, published by a run that continued as new while unknown: visibility's `StartTime`
 * is that run's own, later than the payment's `unknownSince`, so the stuck-unknown sweep selects such runs by this.
 */
export const UnknownSinceAttr = defineSearchAttributeKey('UnknownSince', SearchAttributeType.DATETIME);

/** All of them, for registering them on a server. */
export const paymentSearchAttributes = [
  PaymentStatusAttr,
  MerchantIdAttr,
  OrderIdAttr,
  ProviderAttr,
  UnknownSinceAttr,
] as const;
