import { createHash } from 'node:crypto';
import {
  type CaptureRequest,
  type ChargeRequest,
  type RefundRequest,
  canonicalJson,
  captureSignificantFields,
  refundSignificantFields,
  significantFields,
} from '../domain/payment';

/** SHA-256 hex of the canonical JSON of `value`. */
export const sha256Canonical = (value: unknown): string =>
  createHash('sha256').update(canonicalJson(value)).digest('hex');

/** The fingerprint of a parsed charge request (defaults applied). */
export const chargeFingerprint = (req: ChargeRequest): string => sha256Canonical(significantFields(req));

/** The fingerprint of a capture of the payment `paymentKey`. */
export const captureFingerprint = (paymentKey: string, req: CaptureRequest): string =>
  sha256Canonical(captureSignificantFields(paymentKey, req));

/** The fingerprint of a refund of the payment `paymentKey`. */
export const refundFingerprint = (paymentKey: string, req: RefundRequest): string =>
  sha256Canonical(refundSignificantFields(paymentKey, req));
