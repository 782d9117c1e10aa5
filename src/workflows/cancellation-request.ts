import { type CancellationScope, isCancellation, log } from '@temporalio/workflow';
import type { PaymentStatus } from '../domain/payment';
import type { PaymentEntity } from './payment-entity';
import { whenSettled } from './settled';

/**
 * Why a payment in `status` refuses a cancellation request; undefined where it voids its authorization. A request
 * never takes back money that moved, nor guesses an outcome that is not known: the payment keeps its life (refund
 * window, reconcile, review) and its status.
 */
export function cancellationRefusal(status: PaymentStatus): string | undefined {
  switch (status) {
    case 'authorized':
      return undefined;
    case 'succeeded':
      return 'money moved (captured): refunds stay possible until the refund window closes';
    case 'unknown':
    case 'pending':
      return 'the outcome at the provider is not known yet: the payment keeps reconciling';
    case 'needs_review':
      return "the payment waits for an operator's verdict";
    default:
      return `the payment is ${status}: nothing is held at the provider`;
  }
}

/**
 * Hands the workflow's cancellation request (the web UI's "Request Cancellation", `temporal workflow cancel`) to the
 * payment once `shield` (life-scope.ts) sees one. Call it from the payment's life scope: the decision runs there.
 */
export function onCancellationRequest(payment: PaymentEntity, shield: CancellationScope): void {
  void shield.cancelRequested.catch(() => decide(payment));
}

/**
 * Decides like any request: once the first provider call settled and everything the other jobs of the request's
 * workflow task set off has run. An authorization is voided by the main line's void (the one its expiry takes, with its
 * review of a void that fails); anything else is refused and logged.
 *
 * Histories recorded before: the request reached the life scope as it reached the root scope then (the SDK flag of
 * life-scope.ts), the wait below ends cancelled and the run ends CANCELED as it did.
 */
async function decide(payment: PaymentEntity): Promise<void> {
  payment.cancellationPending = true;
  try {
    await whenSettled(() => payment.state.firstCallSettled);
    const status = payment.view.status;
    const refusal = cancellationRefusal(status);
    if (refusal !== undefined) {
      log.warn('cancellation request refused', { status, reason: refusal });
      return;
    }
    log.info('cancellation request: the authorization is voided at the provider');
    payment.voidWanted = true;
  } catch (err) {
    if (!isCancellation(err)) throw err; // a history from before (above): the run ends CANCELED
  } finally {
    payment.cancellationPending = false;
  }
}
