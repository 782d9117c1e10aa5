/**
 * The update handlers only runs started by older code use: their histories hold these updates, so the handlers stay
 * registered for them to replay; no client sends them any more (docs/versioning.md). `submit` answered a charge's
 * start with its first provider call (histories before `accept`); `capture`, `refund` and `resolve` were requests as
 * updates (histories before the request protocol of request-protocol.ts). Each runs the same code as its successor.
 * They go, with the `*-by-updates` histories in test/histories/, once no open run predates the request protocol.
 */
import type { setHandler as SetHandler } from '@temporalio/workflow';
import {
  type CaptureArgs,
  type RefundArgs,
  type ResolveArgs,
  type SubmitArgs,
  captureUpdate,
  refundUpdate,
  resolveUpdate,
  submitUpdate,
} from '../domain/definitions';
import type { PaymentView } from '../domain/payment';

/** What the legacy handlers run: the payment's current handlers and validators. */
export interface LegacyUpdateHandlers {
  /** The start's early answer, as `submit` gave it (the first provider call's result, or the view after the wait). */
  submit(): Promise<PaymentView>;
  validateSubmit(args: SubmitArgs): void;
  capture(args: CaptureArgs): Promise<PaymentView>;
  validateCapture(args: CaptureArgs): void;
  refund(args: RefundArgs): Promise<PaymentView>;
  validateRefund(args: RefundArgs): void;
  resolve(args: ResolveArgs): Promise<PaymentView>;
  /** Refuses a verdict unless the payment is under review. */
  validateResolve(args: ResolveArgs): void;
}

/** Registers the updates of older histories with `setHandler` (the payment's life scope's). */
export function registerLegacyUpdates(setHandler: typeof SetHandler, h: LegacyUpdateHandlers): void {
  setHandler(submitUpdate, () => h.submit(), { validator: (args) => h.validateSubmit(args) });
  setHandler(captureUpdate, (args) => h.capture(args), { validator: (args) => h.validateCapture(args) });
  setHandler(refundUpdate, (args) => h.refund(args), { validator: (args) => h.validateRefund(args) });
  setHandler(resolveUpdate, (args) => h.resolve(args), { validator: (args) => h.validateResolve(args) });
}
