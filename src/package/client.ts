/**
 * `payment-workflows/client`: what an order service calls: `PaymentsClient` (charge, capture, refund, get, list,
 * resolve, review items) with its typed errors, and the payload codec its Temporal client shares with the workers.
 */
export * from '../client';
export {
  AesGcmPayloadCodec,
  encryptingDataConverter,
  newPayloadKey,
  parsePayloadKeys,
  type PayloadKeys,
} from '../codec';
