import { errorReply, type Reply } from './http';
import type { CapturePaymentBody, CreatePaymentBody, EffectOperation, RefundPaymentBody } from './schemas';
import type { PaymentRecord, RefundRecord } from './state';
import { toPayment, type SimStore } from './store';

/** A committed change to a payment: what the ledger records and what a webhook announces. */
export interface Effect {
  operation: EffectOperation;
  payment: PaymentRecord;
  refund?: RefundRecord;
  amount: number;
}

/** What an operation answers, and the effect it committed (none for declines and business errors). */
export interface Outcome {
  reply: Reply;
  effect?: Effect;
}

const DECLINE_PREFIX = 'pm_decline';
/** Tokens that need the customer's authentication (3-D Secure) before anything is authorized. */
const CUSTOMER_ACTION_PREFIX = 'pm_3ds';

const notFound = (id: string): Outcome => ({
  reply: errorReply(404, 'invalid_request_error', 'resource_missing', `no such payment: ${id}`, { param: 'id' }),
});

const unexpectedState = (p: PaymentRecord, action: string): Outcome => ({
  reply: errorReply(
    400,
    'invalid_request_error',
    'payment_unexpected_state',
    `cannot ${action} a payment with status ${p.status}`,
  ),
});

const tooLarge = (message: string): Outcome => ({
  reply: errorReply(400, 'invalid_request_error', 'amount_too_large', message, { param: 'amount' }),
});

/**
 * Creates a payment; `pm_decline…` tokens decline (`pm_decline_<code>` sets the decline code); `pm_3ds…` tokens wait
 * for the customer (`requires_action`, `next_action.url` from `actionUrl`): nothing is authorized, so no effect yet.
 */
export function createPayment(
  store: SimStore,
  apiKey: string,
  key: string | null,
  body: CreatePaymentBody,
  actionUrl: (paymentId: string) => string,
): Outcome {
  if (body.payment_method.startsWith(DECLINE_PREFIX)) {
    const declineCode = body.payment_method.slice(DECLINE_PREFIX.length).replace(/^_/, '') || 'generic_decline';
    return {
      reply: errorReply(402, 'card_error', 'card_declined', 'Your card was declined.', { decline_code: declineCode }),
    };
  }
  const automatic = body.capture === 'automatic';
  const id = store.newId('pay');
  if (body.payment_method.startsWith(CUSTOMER_ACTION_PREFIX)) {
    const waiting: PaymentRecord = {
      ...newRecord(store, apiKey, key, body, id),
      status: 'requires_action',
      amount_captured: 0,
      next_action: { type: 'redirect_to_url', url: actionUrl(id) },
      capture_mode: body.capture,
    };
    store.addPayment(waiting);
    return { reply: { status: 200, body: toPayment(waiting) } };
  }
  const payment: PaymentRecord = {
    ...newRecord(store, apiKey, key, body, id),
    status: automatic ? 'succeeded' : 'authorized',
    amount_captured: automatic ? body.amount : 0,
  };
  store.addPayment(payment);
  return {
    reply: { status: 200, body: toPayment(payment) },
    effect: { operation: 'create', payment, amount: body.amount },
  };
}

/** The fields every new payment has. */
function newRecord(
  store: SimStore,
  apiKey: string,
  key: string | null,
  body: CreatePaymentBody,
  id: string,
): Omit<PaymentRecord, 'status' | 'amount_captured'> {
  return {
    id,
    amount: body.amount,
    amount_refunded: 0,
    currency: body.currency,
    reference: body.reference,
    created: store.nowS(),
    ...(body.metadata ? { metadata: body.metadata } : {}),
    api_key: apiKey,
    idempotency_key: key,
  };
}

/**
 * The customer's authentication of a payment waiting for it: `succeeded` authorizes (or, with automatic capture,
 * captures) it, the create's effect at last; `failed` fails it (`authentication_failed`), no effect. The answer is the
 * payment either way; a payment that no longer waits is 400.
 */
export function authenticatePayment(store: SimStore, id: string, result: 'succeeded' | 'failed'): Outcome {
  const payment = store.paymentById(id);
  if (!payment) return notFound(id);
  if (payment.status !== 'requires_action') return unexpectedState(payment, 'authenticate');
  if (result === 'failed') {
    store.updatePayment(payment, { status: 'failed', decline_code: 'authentication_failed' }, true);
    return { reply: { status: 200, body: toPayment(payment) } };
  }
  const automatic = payment.capture_mode !== 'manual';
  store.updatePayment(
    payment,
    { status: automatic ? 'succeeded' : 'authorized', amount_captured: automatic ? payment.amount : 0 },
    true,
  );
  return {
    reply: { status: 200, body: toPayment(payment) },
    effect: { operation: 'create', payment, amount: payment.amount },
  };
}

/** Captures an authorized payment in full or in part; the uncaptured rest is released, as with Stripe. */
export function capturePayment(store: SimStore, apiKey: string, id: string, body: CapturePaymentBody): Outcome {
  const payment = store.payment(apiKey, id);
  if (!payment) return notFound(id);
  if (payment.status !== 'authorized') return unexpectedState(payment, 'capture');
  const amount = body.amount ?? payment.amount;
  if (amount > payment.amount) return tooLarge(`capture of ${amount} is over the authorized ${payment.amount}`);
  store.updatePayment(payment, { status: 'succeeded', amount_captured: amount });
  return { reply: { status: 200, body: toPayment(payment) }, effect: { operation: 'capture', payment, amount } };
}

/**
 * Voids (cancels) an authorized payment, or one still waiting for the customer: nothing was authorized then, so its
 * effect moves 0.
 */
export function voidPayment(store: SimStore, apiKey: string, id: string): Outcome {
  const payment = store.payment(apiKey, id);
  if (!payment) return notFound(id);
  if (payment.status !== 'authorized' && payment.status !== 'requires_action') return unexpectedState(payment, 'void');
  const released = payment.status === 'authorized' ? payment.amount : 0;
  store.updatePayment(payment, { status: 'voided' }, true);
  return {
    reply: { status: 200, body: toPayment(payment) },
    effect: { operation: 'void', payment, amount: released },
  };
}

/** Refunds part or all of what was captured and not yet refunded. */
export function refundPayment(store: SimStore, apiKey: string, id: string, body: RefundPaymentBody): Outcome {
  const payment = store.payment(apiKey, id);
  if (!payment) return notFound(id);
  if (payment.status !== 'succeeded') return unexpectedState(payment, 'refund');
  const refundable = payment.amount_captured - payment.amount_refunded;
  if (body.amount > refundable) return tooLarge(`refund of ${body.amount} is over the refundable ${refundable}`);
  store.updatePayment(payment, { amount_refunded: payment.amount_refunded + body.amount });
  const refund: RefundRecord = {
    id: store.newId('re'),
    payment_id: payment.id,
    amount: body.amount,
    status: 'succeeded',
    created: store.nowS(),
    api_key: apiKey,
  };
  store.addRefund(refund);
  const { api_key: _owner, ...publicRefund } = refund;
  return {
    reply: { status: 200, body: publicRefund },
    effect: { operation: 'refund', payment, refund, amount: body.amount },
  };
}
