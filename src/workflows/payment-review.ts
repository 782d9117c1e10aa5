import { providerAmountOf } from '../domain/wallet-operations';
import { ActivityFailure, ApplicationFailure, log, patched, setCurrentDetails } from '@temporalio/workflow';
import type { ResolveArgs } from '../domain/definitions';
import { ErrorType } from '../domain/errors';
import type { PaymentView } from '../domain/payment';
import type { ProviderPayment } from '../domain/provider-payment';
import { describeProviderPayment, formatMoney, paymentCurrentDetails } from '../domain/summaries';
import { messageOf, notSentRetryAfterMs, waitAskedOf } from './failures';
import { statusAfterResolve } from './payment-guards';
import { type PaymentPort, nowIso, stampOf } from './payment-port';
import { type PendingReview, applyProviderPayment, closeReview, forwardStatus } from './payment-state';
import { PATCHES } from './patches';

/** Patch: an operator's `providerPaymentId` is looked up at the provider before it is accepted. */
const VERIFY_OPERATOR_PAYMENT = PATCHES.verifyOperatorPayment.id;
/** Patch: every verdict is checked against a look-up at the provider, whose amounts and status the payment takes. */
const RESOLVE_FROM_PROVIDER = PATCHES.resolveFromProvider.id;

/**
 * An operator's verdicts on the payment's reviews. Nothing an operator says is trusted without the provider: each
 * verdict looks the payment up (by the provider payment id it knows or the operator names, else by its own key), the
 * payment takes what the provider shows as any provider news (which may settle the review by itself), and a verdict
 * the provider does not confirm is refused (`ProviderDisagrees`, naming what it shows). Every verdict applied is
 * recorded in the view (`verdicts`). Runs under the payment's lock.
 */
export class OperatorReview {
  constructor(private readonly payment: PaymentPort) {}

  /** `resolve`: the operator's verdict on the operation under review. */
  async resolve(args: ResolveArgs): Promise<PaymentView> {
    const { state } = this.payment;
    // When the API took the verdict, never before the view's last change (a request without it: this task's clock).
    const { requestedAt } = args;
    const stamp = (): string => stampOf(requestedAt, state.view.updatedAt);
    const review = state.pendingReview;
    if (!review) return state.view;
    const reviewReason = state.view.review?.reason ?? 'outcome unknown';
    if (patched(RESOLVE_FROM_PROVIDER)) await this.resolveAtProvider(args, review, stamp);
    else await this.resolveAsTold(args, review);
    log.info('operator resolved a payment under review', { operation: review.operation, outcome: args.outcome });
    const verdict = {
      ...(args.operator === undefined ? {} : { operator: args.operator }),
      outcome: args.outcome,
      note: args.note,
      operation: review.operation,
      reviewReason,
      at: stamp(),
    };
    state.view.verdicts = [...(state.view.verdicts ?? []), verdict];
    // The web UI's current details: a query answer, no command (histories from before verdicts replay unchanged).
    setCurrentDetails(paymentCurrentDetails(state.view));
    return state.view;
  }

  /** The verdict against a fresh look-up: confirmed (the provider settles the review) or `failed` with nothing shown. */
  private async resolveAtProvider(args: ResolveArgs, review: PendingReview, stamp: () => string): Promise<void> {
    const { payment } = this;
    const { state } = payment;
    const found = await this.lookUp(args, review);
    // What the provider shows is news like a webhook's: the payment takes it, and it may settle the review by itself.
    if (found) payment.learn(found, stamp());
    const shown = state.pendingReview === undefined;
    if (args.outcome === 'succeeded' && !shown) throw disagrees(notShown(review, found, state.view), found);
    if (args.outcome === 'failed' && shown) throw disagrees(shownAnyway(review, found, state.view), found);
    if (shown) return;
    // `failed`, and the provider shows nothing of it: the operation did not happen; the status follows the provider's.
    const told = statusAfterResolve(review, 'failed', payment.input.request.capture === 'manual');
    const after = found ? forwardStatus(told, found.status) : told;
    closeReview(state, 'rejected');
    payment.transition(after, undefined, stamp());
    payment.syncOperations();
  }

  /** The provider payment the verdict is checked against: the one the operator names (verified), else ours. */
  private async lookUp(args: ResolveArgs, review: PendingReview): Promise<ProviderPayment | null> {
    const { input, state } = this.payment;
    const { request } = input;
    try {
      if (args.providerPaymentId !== undefined) return await this.verified(args.providerPaymentId, review);
      const known = state.view.providerPaymentId;
      return await this.payment.requireBinding().acts.lookup.lookupPayment({
        provider: this.payment.provider,
        ...this.payment.keyScope,
        operation: 'create',
        reference: request.orderId,
        // Known: read by id. Not known (a create under review): by the payment's key, else by its order, as a
        // reconcile looks: only a payment that could be this charge counts.
        ...(known === undefined
          ? {
              match: {
                amount: providerAmountOf(request),
                currency: request.amount.currency,
                ...(state.firstSentAtMs === undefined ? {} : { createdGteMs: state.firstSentAtMs }),
              },
            }
          : { paymentId: known }),
      });
    } catch (err) {
      if (!(err instanceof ActivityFailure)) throw err;
      throw ApplicationFailure.create({
        type: ErrorType.ProviderUnavailable,
        message: `The provider could not be asked (${messageOf(err)}); nothing was recorded: send the verdict again`,
        // The wait the provider asked for (a cool-down's Retry-After), else the default: the API's Retry-After.
        details: [{ retryAfterMs: waitAskedOf(err) ?? notSentRetryAfterMs }],
        nonRetryable: true,
      });
    }
  }

  /** Histories recorded before {@link RESOLVE_FROM_PROVIDER}: the verdict as the operator told it. */
  private async resolveAsTold(args: ResolveArgs, review: PendingReview): Promise<void> {
    const { state, input } = this.payment;
    const { request } = input;
    let found: ProviderPayment | undefined;
    if (args.outcome === 'succeeded' && args.providerPaymentId && patched(VERIFY_OPERATOR_PAYMENT)) {
      found = await this.verified(args.providerPaymentId, review);
    }
    if (args.outcome === 'succeeded') {
      if (found) applyProviderPayment(state, found, nowIso());
      if (review.operation === 'create') {
        if (args.providerPaymentId && !found) state.view.providerPaymentId = args.providerPaymentId;
        if (!found) {
          state.view.amountAuthorized = state.view.amount.value;
          if (request.capture === 'automatic') state.view.amountCaptured = state.view.amount.value;
        }
      } else if (review.operation === 'capture') {
        state.view.amountCaptured = Math.max(state.view.amountCaptured, review.expectAtLeast);
      } else if (review.operation === 'refund') {
        state.view.amountRefunded = Math.max(state.view.amountRefunded, review.expectAtLeast);
      }
    }
    const after = statusAfterResolve(review, args.outcome, request.capture === 'manual');
    closeReview(state, args.outcome === 'succeeded' ? 'done' : 'rejected');
    this.payment.transition(after);
    this.payment.syncOperations();
  }

  /** Looks an operator-supplied provider payment id up and checks it is this payment (merchant, key, money). */
  private async verified(providerPaymentId: string, review: PendingReview): Promise<ProviderPayment> {
    const { payment } = this;
    const { input, state } = payment;
    const { request } = input;
    const reject = (why: string) =>
      ApplicationFailure.create({
        type: ErrorType.ValidationError,
        message: `providerPaymentId ${why}`,
        nonRetryable: true,
        details: [{ field: 'providerPaymentId' }],
      });
    if (
      review.operation !== 'create' &&
      state.view.providerPaymentId &&
      providerPaymentId !== state.view.providerPaymentId
    )
      throw reject('is not the provider payment of this payment');
    const found = await payment.requireBinding().acts.lookup.lookupPayment({
      provider: payment.provider,
      ...payment.keyScope,
      operation: 'create',
      reference: request.orderId,
      paymentId: providerPaymentId,
    });
    if (!found) throw reject('was not found at the provider');
    const m = found.metadata;
    if (m && (m.merchant_id !== input.merchantId || m.payment_key !== input.key))
      throw reject('belongs to another payment at the provider');
    if (found.amount !== providerAmountOf(request) || found.currency !== request.amount.currency)
      throw reject('has another amount or currency at the provider');
    if (!m && found.reference !== request.orderId) throw reject('has another reference at the provider');
    return found;
  }
}

/** A verdict the provider does not confirm; the details carry what it shows (none: it shows no payment). */
function disagrees(message: string, found: ProviderPayment | null) {
  const shows = found && {
    id: found.id,
    status: found.status,
    amount: found.amount,
    currency: found.currency,
    amountCaptured: found.amountCaptured,
    amountRefunded: found.amountRefunded,
  };
  return ApplicationFailure.create({
    type: ErrorType.ProviderDisagrees,
    message,
    nonRetryable: true,
    details: [shows ? { providerPayment: shows } : {}],
  });
}

/** Why `succeeded` is refused: what the operation needs the provider to show, and what it shows. */
function notShown(review: PendingReview, found: ProviderPayment | null, view: PaymentView): string {
  const nothing = 'Nothing was recorded.';
  if (review.operation === 'create') {
    return (
      'The provider shows no payment under this payment’s key or order: nothing confirms "succeeded". Name the ' +
      `provider payment you found with providerPaymentId (it is looked up first), or resolve "failed". ${nothing}`
    );
  }
  if (!found) return `The provider does not know payment ${view.providerPaymentId ?? '(none)'}. ${nothing}`;
  const needs = (what: string) =>
    `; the ${review.operation} needs ${formatMoney(review.expectAtLeast, found.currency)} ${what}`;
  const need =
    review.operation === 'capture'
      ? needs('captured')
      : review.operation === 'refund'
        ? needs('refunded')
        : ', not voided';
  return `The provider does not show this ${review.operation}: ${describeProviderPayment(found)}${need}. ${nothing}`;
}

/** Why `failed` is refused: the provider shows the operation happened, and the payment took that. */
function shownAnyway(review: PendingReview, found: ProviderPayment | null, view: PaymentView): string {
  const what = found ? describeProviderPayment(found) : 'it';
  const took = `The payment took the provider’s answer (now ${view.status}); your verdict was not recorded.`;
  return review.operation === 'create'
    ? `The provider holds this payment: ${what}. It did not fail. ${took}`
    : `The provider shows this ${review.operation}: ${what}. ${took}`;
}
