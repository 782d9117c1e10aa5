import {
  CancellationScope,
  WorkflowIdReusePolicy,
  condition,
  executeChild,
  log,
  patched,
  startChild,
} from '@temporalio/workflow';
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/common';
import type { MovementCheck, RequestRefusal } from '../domain/definitions';
import { ErrorType } from '../domain/errors';
import { movementTryWorkflowId, reconcileWorkflowId } from '../domain/ids';
import type { ReconcileResult } from '../domain/operations';
import type { PaymentView } from '../domain/payment';
import { captureWorkflow } from './capture';
import { messageOf, notSentRetryAfterMs } from './failures';
import { type MoneyMovementInput, type MoneyMovementResult, movementReconcileInput } from './money-movement';
import type { Lock } from './lock';
import { keyReused } from './payment-guards';
import type { PaymentPort } from './payment-port';
import { type SubOperation, findSubOperation, operationShown, reviewOf } from './payment-state';
import { reconcileWorkflow } from './reconcile';
import { refundWorkflow } from './refund';
import { NEWS, unlessNews } from './unless-news';
import { PATCHES } from './patches';
import { refundWalletShare } from './wallet-part';

/** Patch: a capture's or refund's reconcile ends as soon as the provider's news shows the operation (see unlessNews). */
const MOVEMENT_ENDS_WITH_NEWS = PATCHES.movementEndsWithNews.id;
/** Patch: a capture or refund records the payment's total before it (histories before it have none). */
const OPERATION_TOTAL_BEFORE = PATCHES.operationTotalBefore.id;

type MovementKind = 'capture' | 'refund';

/** The refusal a request answered by a try that never left gets: the provider is unavailable, repeat after the wait. */
export function neverSentRefusal(op: SubOperation): RequestRefusal {
  return {
    type: ErrorType.ProviderUnavailable,
    message: `This ${op.kind} never reached the provider (${op.reason ?? 'provider_unavailable'}); nothing moved. Repeat it after Retry-After`,
    details: [{ retryAfterMs: op.retryAfterMs ?? notSentRetryAfterMs }],
  };
}

/** What the money movements need of the payment beyond the {@link PaymentPort}: the lock they run under, publishing. */
export interface MovementsPort extends PaymentPort {
  /** Serializes captures, refunds, resolves and the expiry void. */
  readonly lock: Lock;
  /** Publishes the status (search attribute) and the web UI's current details. */
  publish(): void;
}

interface MovementArgs {
  readonly fingerprint: string;
  readonly amount?: number;
}

/**
 * The payment's captures, refunds and its void after authorization expiry: each remembered by its own key as a
 * sub-operation of the payment, its first provider call run as a child workflow, an unknown outcome reconciled beside
 * the main line.
 */
export class MoneyMovements {
  constructor(private readonly payment: MovementsPort) {}

  private totalBefore(kind: MovementKind): number {
    const view = this.payment.state.view;
    return kind === 'capture' ? view.amountCaptured : view.amountRefunded;
  }

  /**
   * Capture and refund share one shape. A repeat of a known key (same fingerprint) answers its operation's state
   * without a new effect; the same key with another amount is refused. A new key is checked against the state under the
   * lock (validators run before the lock, so concurrent updates are checked again), then its first provider call runs
   * as a child workflow whose id, `<kind>:<merchant>:<key>`, is the merchant-wide UNIQUE constraint of the key: a key
   * used on another payment is refused before any effect. The update answers once that first call settled; an unknown
   * outcome goes on as a reconcile child without holding the update or the lock. A key whose try provably never left
   * (`failed`) is not spent: its repeat is checked like a new request and tries again, as this payment's next try.
   */
  async run(kind: MovementKind, key: string, args: MovementArgs, assertAllowed: () => void): Promise<PaymentView> {
    const { payment } = this;
    const { state } = payment;
    const op = await payment.lock.run(async () => {
      const earlier = findSubOperation(state, kind, key);
      if (earlier && earlier.fingerprint !== args.fingerprint) throw keyReused(kind);
      if (earlier && earlier.state !== 'failed') return earlier; // a repeat: the same answer, no new effect
      assertAllowed();
      // A payment with a wallet part refunds to the wallet first (undefined without one: the refund is the card's).
      const walletShare =
        kind === 'refund' ? await refundWalletShare(payment, key, args.amount ?? 0, earlier?.walletAmount) : undefined;
      const amount =
        earlier?.amount ??
        (args.amount === undefined
          ? state.view.amountAuthorized - state.view.amountCaptured
          : args.amount - (walletShare ?? 0));
      if (walletShare !== undefined && amount === 0) return this.walletOnlyRefund(key, args.fingerprint, walletShare);
      const before = this.totalBefore(kind);
      const movement: MoneyMovementInput = { ...this.movementInput(key, amount), firstCallOnly: true };
      const startedAtMs = Date.now();
      const tries = earlier === undefined ? 1 : (earlier.tries ?? 1) + 1;
      const child = await this.startTry(kind, key, tries, movement, before);
      const op: SubOperation = earlier ?? {
        kind,
        key,
        fingerprint: args.fingerprint,
        amount,
        state: 'running',
        answer: null,
        ...(walletShare === undefined ? {} : { walletAmount: walletShare }),
      };
      if (earlier) {
        Object.assign(earlier, { state: 'running', tries, firstCallSettled: false });
        delete earlier.reason;
        delete earlier.retryAfterMs;
      } else state.subOperations.push(op);
      // What the provider's total must reach to show it (a review and the refundable amount read it).
      if (patched(OPERATION_TOTAL_BEFORE)) op.totalBefore = before;
      payment.syncOperations();
      let result: MoneyMovementResult;
      try {
        result = await child.result();
      } catch (err) {
        // The child failed or was terminated: whether its call reached the provider is not known.
        result = {
          outcome: 'unknown',
          reason: `${kind} ended without a result: ${messageOf(err)}`,
          firstSentAtMs: startedAtMs,
        };
      }
      op.firstCallSettled = true;
      this.settle(op, result, movement, before);
      return op;
    });
    await condition(() => op.firstCallSettled === true || op.state !== 'running');
    return state.view;
  }

  /** A refund the wallet's captured part covers: done once the wallet has it back, nothing sent to the provider. */
  private walletOnlyRefund(key: string, fingerprint: string, walletAmount: number): SubOperation {
    const op: SubOperation = {
      kind: 'refund',
      key,
      fingerprint,
      amount: 0,
      walletAmount,
      state: 'done',
      answer: null,
      firstCallSettled: true,
    };
    this.payment.state.subOperations.push(op);
    this.payment.syncOperations();
    this.payment.publish();
    return op;
  }

  /** What a capture or refund child needs to move money on this payment. */
  private movementInput(key: string, amount: number): MoneyMovementInput {
    const { payment } = this;
    const { capabilities, retry } = payment.requireBinding();
    return {
      merchantId: payment.input.merchantId,
      key,
      provider: payment.provider,
      reference: payment.input.request.orderId,
      paymentId: payment.state.view.providerPaymentId as string,
      amount,
      capabilities,
      timings: payment.input.timings,
      ...(retry === undefined ? {} : { retry }),
    };
  }

  /**
   * The child of one try: the first under the key's merchant-wide id; a later one (after tries that never left) under
   * an id of its own. Never a second run under one id, also after the first closed: the key belongs to its first
   * request, and an id already taken is the key used on another payment.
   */
  private async startTry(
    kind: MovementKind,
    key: string,
    tries: number,
    movement: MoneyMovementInput,
    before: number,
  ): Promise<{ result(): Promise<MoneyMovementResult> }> {
    const workflowId = movementTryWorkflowId(kind, this.payment.input.merchantId, key, tries);
    const workflowIdReusePolicy = WorkflowIdReusePolicy.REJECT_DUPLICATE;
    try {
      return kind === 'capture'
        ? await startChild(captureWorkflow, {
            workflowId,
            args: [{ ...movement, amountCapturedBefore: before }],
            workflowIdReusePolicy,
          })
        : await startChild(refundWorkflow, {
            workflowId,
            args: [{ ...movement, amountRefundedBefore: before }],
            workflowIdReusePolicy,
          });
    } catch (err) {
      if (err instanceof WorkflowExecutionAlreadyStartedError) throw keyReused(kind); // used on another payment
      throw err;
    }
  }

  /**
   * The update validator: a known key answers (or is refused for another request); a new one, or one whose try never
   * left, must be allowed now.
   */
  validate(kind: MovementKind, key: string, args: MovementArgs, assertAllowed: () => void): void {
    const earlier = findSubOperation(this.payment.state, kind, key);
    if (earlier && earlier.fingerprint !== args.fingerprint) throw keyReused(kind);
    if (earlier && earlier.state !== 'failed') return;
    assertAllowed();
  }

  /** Which try of the key a request will be answered by (see {@link MovementCheck}); nothing for a new key. */
  answeredBy(kind: MovementKind, key: string): Pick<MovementCheck, 'known' | 'answeredByTry'> {
    const op = findSubOperation(this.payment.state, kind, key);
    if (!op) return {};
    const tries = op.tries ?? 1;
    if (op.state === 'failed') return { answeredByTry: tries + 1 };
    return { known: true, ...(tries > 1 ? { answeredByTry: tries } : {}) };
  }

  /** Records how a capture's or refund's first call (or, in older children, its whole reconcile) ended. */
  private settle(op: SubOperation, result: MoneyMovementResult, movement: MoneyMovementInput, before: number) {
    if (result.outcome === 'done') {
      op.state = 'done';
      this.payment.learn(result.payment);
    } else if (result.outcome === 'rejected') {
      op.state = 'rejected';
      op.reason = result.reason;
      if (result.providerCode !== undefined) op.providerCode = result.providerCode;
    } else if (result.outcome === 'not_sent') {
      // Nothing reached the provider: a refusal its callers act on, holding nothing back (the key may try again).
      op.state = 'failed';
      op.reason = `provider_unavailable: ${result.reason}`;
      op.retryAfterMs = result.retryAfterMs ?? notSentRetryAfterMs;
      log.warn(`${op.kind} never reached the provider`, { reason: result.reason, retryAfterMs: op.retryAfterMs });
    } else if (result.outcome === 'unknown') {
      this.reconcile(op, movement, before, result.firstSentAtMs);
    } else {
      this.sendToReview(op, result.reason);
    }
    this.payment.syncOperations();
  }

  /**
   * The durable wait-and-check of a capture or refund with an unknown outcome. It runs beside the main line, not in the
   * update handler, so the caller gets its 202 at once; the operation stays `running` (and new captures and refunds
   * answer `operation_in_flight`) until the reconcile ends. A reconcile that fails or is terminated decided nothing:
   * the operation goes to review, never stays running.
   */
  private reconcile(op: SubOperation, movement: MoneyMovementInput, before: number, sentAtMs: number) {
    const { payment } = this;
    const kind = op.kind === 'refund' ? 'refund' : 'capture';
    op.reconciling = true;
    void (async () => {
      let result: ReconcileResult | undefined;
      let failure: string | undefined;
      const endsWithNews = patched(MOVEMENT_ENDS_WITH_NEWS);
      const shown = () => operationShown(payment.state, op);
      // A webhook already showed it (its signal found no reconcile to end): no reconcile at all.
      if (endsWithNews && shown()) return this.settledByNews(op);
      const scope = new CancellationScope();
      try {
        const running = scope.run(() =>
          executeChild(reconcileWorkflow, {
            workflowId: reconcileWorkflowId(payment.input.merchantId, kind, op.key),
            args: [movementReconcileInput(kind, movement, before, sentAtMs)],
          }),
        );
        const ended = endsWithNews
          ? await unlessNews(scope, running, shown, (p) => payment.reconcileEnding(p))
          : await running;
        if (ended === NEWS) return this.settledByNews(op);
        result = ended;
      } catch (err) {
        failure = `reconcile of ${kind} ended without a result: ${messageOf(err)}`;
        log.warn('reconcile of a capture/refund ended without a result; it goes to review', { reason: failure });
      }
      op.reconciling = false;
      if (result?.outcome === 'found') {
        op.state = 'done';
        // At the reconcile's time (absent before results said): the same in a query that applies it ahead of its task.
        payment.learn(result.payment, result.at);
      } else if (result?.outcome === 'rejected' || result?.outcome === 'declined') {
        op.state = 'rejected';
        op.reason = result.outcome === 'rejected' ? result.reason : result.declineCode;
      } else {
        this.sendToReview(
          op,
          result?.outcome === 'needs_review' ? result.reason : (failure ?? 'reconcile ended'),
          result?.at,
        );
      }
      payment.syncOperations();
    })();
  }

  /** An operation whose outcome is unknown, or whose reconcile found nothing, waits for an operator. */
  private sendToReview(op: SubOperation, reason: string, at?: string): void {
    const { payment } = this;
    op.state = 'needs_review';
    op.reason = reason;
    payment.state.pendingReview = reviewOf(op, payment.state.view);
    payment.transition('needs_review', reason, at);
    payment.syncOperations();
  }

  /** A webhook showed the provider's total covering the operation before its reconcile could say so: it is done. */
  private settledByNews(op: SubOperation): void {
    op.reconciling = false;
    op.state = 'done';
    this.payment.syncOperations();
    this.payment.publish();
  }

  /**
   * Voids an authorization that lapsed without a capture (or that a cancellation request releases: `why`); a failed
   * void goes to review as a void. Run under the lock.
   */
  async voidExpired(why = 'authorization expiry'): Promise<void> {
    const { payment } = this;
    const { state, input } = payment;
    if (state.view.status !== 'authorized') return;
    const paymentId = state.view.providerPaymentId as string;
    const key = `${input.key}:void`;
    // A void is an operation of its own: shown in the view, reviewed as a void (never as a capture).
    let op = findSubOperation(state, 'void', key);
    if (!op) {
      op = {
        kind: 'void',
        key,
        fingerprint: '',
        amount: state.view.amountAuthorized - state.view.amountCaptured,
        state: 'running',
      };
      state.subOperations.push(op);
    }
    op.state = 'running';
    payment.syncOperations();
    try {
      const voided = await payment.requireBinding().acts.write.voidPayment({
        provider: payment.provider,
        merchantId: input.merchantId,
        key,
        paymentId,
      });
      op.state = 'done';
      payment.learn(voided);
      payment.syncOperations();
    } catch (err) {
      // A void that fails leaves an authorization that lapses at the provider on its own; an operator decides.
      this.sendToReview(op, `void after ${why} failed: ${messageOf(err)}`);
    }
  }
}
