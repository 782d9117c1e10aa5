import { condition, log, patched, workflowInfo } from '@temporalio/workflow';
import { defaultCustomerActionTimeoutMs } from '../domain/customer-action';
import { formatWait } from '../domain/summaries';
import { messageOf } from './failures';
import type { PaymentPort } from './payment-port';
import { PATCHES } from './patches';

/** What the wait for the customer needs of the payment: the {@link PaymentPort} and the main line's parking. */
export interface CustomerActionPort extends PaymentPort {
  /** Runs one of the main line's waits parked, so requests (a capture: refused) are answered meanwhile. */
  park<T>(wait: () => Promise<T>): Promise<T>;
}

/**
 * Patch marker of the wait for the customer. No recorded history reaches `requires_action` (no earlier worker could
 * read such a payment), so nothing replays differently; the marker names the commands of this path in the histories
 * that have them.
 */
const CUSTOMER_ACTION_WAIT = PATCHES.customerActionWait.id;

/** Patch: an expired customer action whose cancel is refused goes on trying in the next run (see {@link expire}). */
const CUSTOMER_ACTION_CANCEL_CONTINUES = PATCHES.customerActionCancelContinues.id;

/**
 * A payment that waits for the customer (`requires_action`, 3-D Secure): durably, for the provider's word, a webhook
 * (applied by the entity, it ends the wait at once) or a look-up on the reconcile's schedule, for at most
 * `customerActionTimeoutMs` (kept in the state, so a continuation keeps the deadline). Then the payment is cancelled
 * at the provider and ends `declined` `action_expired`; a failed authentication ends it `declined`
 * `authentication_failed`; a completed one `authorized` or `succeeded`. Returns when the payment no longer waits, or
 * when the run should continue as new.
 */
export async function awaitCustomer(payment: CustomerActionPort): Promise<void> {
  const { state, input } = payment;
  patched(CUSTOMER_ACTION_WAIT);
  const timeoutMs = input.timings.customerActionTimeoutMs ?? defaultCustomerActionTimeoutMs;
  const wait = (state.customerWait ??= { expiresAtMs: Date.now() + timeoutMs, checks: 0 });
  const waiting = () => state.view.status === 'requires_action';
  const schedule = input.timings.reconcileScheduleMs;
  for (;;) {
    const remaining = wait.expiresAtMs - Date.now();
    if (remaining <= 0) break;
    const delay = Math.min(schedule[Math.min(wait.checks, schedule.length - 1)] ?? remaining, remaining);
    await payment.park(() =>
      condition(() => !waiting() || workflowInfo().continueAsNewSuggested, delay, {
        summary: `wait for the customer, look the payment up in ${formatWait(delay)} (expires in ${formatWait(remaining)})`,
      }),
    );
    if (!waiting() || workflowInfo().continueAsNewSuggested) return;
    wait.checks += 1;
    await lookUp(payment);
    if (!waiting()) return;
  }
  await expire(payment);
}

/**
 * The wait is over: the payment is cancelled at the provider (a void, under a key of its own) and ends declined
 * `action_expired`. A customer who completed meanwhile wins: the cancel is refused, and the look-up that follows shows
 * the payment authorized or captured. While the provider still shows it waiting (the cancel failed), it is cancelled
 * again after the schedule's last delay: it is never declined while the customer could still complete it. Once the
 * server suggests it, the run continues as new between two tries, so a provider that never cancels does not grow one
 * run's history without bound (the next run cancels at once: the wait's deadline went with the state).
 */
async function expire(payment: CustomerActionPort): Promise<void> {
  const { state, input } = payment;
  const waiting = () => state.view.status === 'requires_action';
  // Between tries the run may continue as new (histories before the patch never did): the next run cancels at once.
  const continues = patched(CUSTOMER_ACTION_CANCEL_CONTINUES);
  const moveOn = () => !waiting() || (continues && workflowInfo().continueAsNewSuggested);
  const schedule = input.timings.reconcileScheduleMs;
  const retryMs = schedule[schedule.length - 1] ?? defaultCustomerActionTimeoutMs;
  for (;;) {
    try {
      const cancelled = await payment.requireBinding().acts.write.voidPayment({
        provider: payment.provider,
        merchantId: input.merchantId,
        key: `${input.key}:cancel`,
        paymentId: state.view.providerPaymentId as string,
      });
      payment.learn(cancelled);
    } catch (err) {
      log.warn('cancel of a payment the customer never completed failed; looking it up', { reason: messageOf(err) });
      await lookUp(payment);
    }
    if (moveOn()) return;
    await payment.park(() =>
      condition(moveOn, retryMs, {
        summary: `cancel the expired customer action again in ${formatWait(retryMs)}`,
      }),
    );
    if (moveOn()) return;
  }
}

/** One look-up of the payment by its provider id; a failed look-up decides nothing (the wait goes on). */
async function lookUp(payment: CustomerActionPort): Promise<void> {
  const { state, input } = payment;
  try {
    const found = await payment.requireBinding().acts.lookup.lookupPayment({
      provider: payment.provider,
      ...payment.keyScope,
      operation: 'create',
      reference: input.request.orderId,
      paymentId: state.view.providerPaymentId,
    });
    if (found) payment.learn(found);
  } catch (err) {
    log.warn('look-up of a payment waiting for the customer failed', { reason: messageOf(err) });
  }
}
