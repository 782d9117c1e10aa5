import type {
  CaptureArgs,
  MovementAnswer,
  MovementCheck,
  RefundArgs,
  RequestId,
  RequestRefusal,
} from '../domain/definitions';
import type { PaymentView } from '../domain/payment';
import { assertCapturable, assertRefundable } from './payment-guards';
import type { PaymentPort } from './payment-port';
import { type MoneyMovements, neverSentRefusal } from './payment-movements';
import { refusalOrNull } from './request-protocol';
import { findSubOperation, keepAnswer } from './payment-state';

/**
 * Captures and refunds as the payment receives them: the updates with their validators (kept for payments whose
 * history recorded them) and the requests' side (see serveRequest): the check, the refusal kept for its caller, the
 * answer read back. The money moves in {@link MoneyMovements}, against the payment's rules (payment-guards.ts).
 */
export class MovementRequests {
  constructor(
    private readonly payment: Pick<PaymentPort, 'state'>,
    private readonly movements: MoneyMovements,
  ) {}

  /** `capture` (update, or request): under the lock, against the payment's rules. */
  capture(args: CaptureArgs): Promise<PaymentView> {
    return this.movements.run('capture', args.captureKey, args, () =>
      assertCapturable(this.payment.state, args.amount),
    );
  }

  /** The capture update's validator: the same rules, before anything is recorded. */
  validateCapture(args: CaptureArgs): void {
    this.movements.validate('capture', args.captureKey, args, () => assertCapturable(this.payment.state, args.amount));
  }

  /** `refund` (update, or request): under the lock, against the payment's rules. */
  refund(args: RefundArgs): Promise<PaymentView> {
    return this.movements.run('refund', args.refundKey, args, () => assertRefundable(this.payment.state, args.amount));
  }

  /** The refund update's validator: the same rules, before anything is recorded. */
  validateRefund(args: RefundArgs): void {
    this.movements.validate('refund', args.refundKey, args, () => assertRefundable(this.payment.state, args.amount));
  }

  /** A capture or refund request the payment's rules refused: kept for its caller (its success is its operation's). */
  keepRefusal(kind: 'capture' | 'refund', key: string, { requestId }: RequestId, refusal?: RequestRefusal) {
    if (!refusal) return;
    keepAnswer((this.payment.state.refusals ??= []), { kind, key, requestId, refusal, atMs: Date.now() }, Date.now());
  }

  /** The update validators' verdict on a capture or refund, as a query: the caller asks before it sends anything. */
  check(kind: 'capture' | 'refund', args: CaptureArgs | RefundArgs): MovementCheck {
    const key = kind === 'capture' ? (args as CaptureArgs).captureKey : (args as RefundArgs).refundKey;
    const refusal = refusalOrNull(() =>
      kind === 'capture' ? this.validateCapture(args as CaptureArgs) : this.validateRefund(args as RefundArgs),
    );
    if (refusal) return { refusal };
    return this.movements.answeredBy(kind, key);
  }

  /**
   * One request's answer: its refusal, or the operation under its key (with this request's fingerprint) and whether
   * its first provider call settled; a try that never left answers as a refusal (the provider is unavailable). Null
   * while the request is not handled yet, also while the try it waits for (`answeredByTry`) has not started.
   */
  answer(
    kind: 'capture' | 'refund',
    key: string,
    requestId: string,
    fingerprint: string,
    answeredByTry = 1,
  ): MovementAnswer | null {
    const { state } = this.payment;
    const refused = state.refusals?.find((r) => r.requestId === requestId && r.kind === kind && r.key === key);
    if (refused) return { refusal: refused.refusal, settled: true, view: state.view };
    const op = findSubOperation(state, kind, key);
    if (!op || op.fingerprint !== fingerprint || (op.tries ?? 1) < answeredByTry) return null;
    if (op.state === 'failed') return { refusal: neverSentRefusal(op), settled: true, view: state.view };
    // Once it succeeded, the view it succeeded with: a repeat replays that, not what later operations made of it.
    return { settled: op.firstCallSettled === true || op.state !== 'running', view: op.answer ?? state.view };
  }
}
