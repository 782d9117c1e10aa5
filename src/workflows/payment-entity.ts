import {
  ApplicationFailure,
  type CancellationScope,
  condition,
  getExternalWorkflowHandle,
  log,
  patched,
  setCurrentDetails,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import {
  type MovementAnswerArgs,
  type MovementCheckArgs,
  type ResolveAnswer,
  type ResolveArgs,
  type SubmitArgs,
  acceptUpdate,
  captureRequest,
  ensureReconcileSignal,
  firstAnswerQuery,
  paymentQuery,
  reconcileResolvedSignal,
  refundRequest,
  resolveRequest,
  webhookSignal,
  type ProviderEventHandling,
} from '../domain/definitions';
import { ErrorType } from '../domain/errors';
import { type KeyScope, keyScope, reconcileWorkflowId } from '../domain/ids';
import type { PaymentStatus, PaymentView } from '../domain/payment';
import type { ProviderCapabilities, ProviderEvent, ProviderPayment } from '../domain/provider-payment';
import type { RetryOverrides } from '../domain/retry-policy';
import {
  MerchantIdAttr,
  OrderIdAttr,
  PaymentStatusAttr,
  ProviderAttr,
  UnknownSinceAttr,
} from '../domain/search-attributes';
import { formatWait, paymentCurrentDetails } from '../domain/summaries';
import type { ChargeWorkflowInput } from '../domain/workflow-inputs';
import { registerLegacyUpdates } from './legacy-updates';
import { setHandlerIn } from './life-scope';
import { Lock } from './lock';
import type { CustomerActionPort } from './customer-action';
import type { FirstWalletStep } from './first-create';
import type { CreatePort } from './payment-create';
import { MoneyMovements, type MovementsPort } from './payment-movements';
import { MovementRequests } from './movement-requests';
import { assertUnderReview } from './payment-guards';
import { nowIso, stampOf } from './payment-port';
import { refusalOrNull, serveRequest } from './request-protocol';
import { OperatorReview } from './payment-review';
import {
  type PaymentState,
  applyProviderEvent,
  applyProviderPayment,
  closeReview,
  initialState,
  keepAnswer,
  operationViews,
  firstAnswerDue,
  recordFirstAnswer,
  recordOperationAnswers,
  reviewSatisfied,
  setStatus,
} from './payment-state';
import { ProviderBinding, type RecordedProviderConfig } from './provider-binding';
import { whenSettled } from './settled';
import { PATCHES } from './patches';

/** Patch: the status search attribute is upserted only when the status changed (histories before it upsert more). */
const PUBLISH_ON_CHANGE = PATCHES.publishOnChange.id;
/** Patch: a provider event is applied only from the provider holding the payment (failover moves it). */
const EVENTS_FROM_HOLDER = PATCHES.eventsFromHolder.id;
/** Patch: a run that continued as new while unknown publishes when the payment became unknown (`UnknownSince`). */
const PUBLISH_UNKNOWN_SINCE = PATCHES.publishUnknownSince.id;

/** Carried across continue-as-new: the payment's whole state plus what the first run learnt. */
export interface ChargeContinuation {
  readonly state: PaymentState;
  readonly capabilities: ProviderCapabilities;
  /** Shape 3: the worker's retry presets its first run recorded (older shapes take theirs from the input). */
  readonly retry?: RetryOverrides;
}

/**
 * One payment's serialized state and its message handlers (the entity of `chargeWorkflow`): the state, the lock that
 * serializes captures, refunds and resolves, the binding of the provider holding it, the handlers of its updates,
 * signals and queries (requests served by request-protocol.ts, captures and refunds taken by movement-requests.ts),
 * and the helpers that publish what changed. It owns the parts that move the payment (its create, its money movements,
 * its operator review), each of which sees it through a port (payment-port.ts). `chargeWorkflow` registers the
 * handlers and runs the main loop.
 */
export class PaymentEntity implements CreatePort, MovementsPort, CustomerActionPort {
  readonly state: PaymentState;
  readonly lock = new Lock();
  /** The lean shape (see HistoryShape) takes what it can from its input instead of recording it in history. */
  readonly lean: boolean;
  /**
   * The provider holding the payment, bound with the configuration the payment recorded for it; absent only in a
   * shape-3 charge until its create's first step records the worker's view (see createAtProvider).
   */
  binding: ProviderBinding | undefined;
  /** A split payment's wallet part while its first step holds and settles it (charge.ts, first-create.ts). */
  firstWallet: FirstWalletStep | undefined = undefined;
  /** What the payment knows of its provider's configuration before it is bound: its continuation's or its input's. */
  private readonly recorded: Partial<RecordedProviderConfig>;
  /** The create's reconcile child is running. */
  reconcileRunning = false;
  /** Reconcile children cancelled by the provider's news that have not ended yet (see {@link reconcileEnding}). */
  reconcilesEnding = 0;
  /** The main loop should start a reconcile of the create (an unknown first call, or the sweep asked). */
  reconcileWanted = false;
  /** A cancellation request is being decided (cancellation-request.ts): the run does not continue as new meanwhile. */
  cancellationPending = false;
  /** A cancellation request asked the main line to void the authorization now. */
  voidWanted = false;
  /**
   * This task decided news that any retry of the task decides the same (see {@link newsReproducible}): its handoff may
   * run inside the task (payment-news.ts). Not state: a later task, or a continuation, never inherits it.
   */
  private reproducibleNews = false;
  /** The main line is at one of its waits (for a capture, a timer, a reconcile's end): a request may act now. */
  private parked = false;
  private publishedStatus: PaymentStatus;
  private readonly movements = new MoneyMovements(this);
  private readonly movementRequests = new MovementRequests(this, this.movements);
  private readonly verdicts = new OperatorReview(this);

  constructor(
    readonly input: ChargeWorkflowInput,
    carried?: ChargeContinuation,
  ) {
    this.state = carried?.state ?? initialState(input, input.createdAt ?? nowIso());
    this.lean = input.shape === 2 || input.shape === 3;
    // Shape 3 takes neither from its input: the worker's view comes with the create's first step.
    this.recorded = {
      capabilities: carried?.capabilities ?? (input.shape === 2 ? input.capabilities : undefined),
      // The retry presets every activity runs with: the input's (older shapes), the worker's (shape 3, once recorded).
      retry: carried?.retry ?? (input.shape === 3 ? undefined : input.retry),
    };
    this.publishedStatus = this.state.view.status;
  }

  get request() {
    return this.input.request;
  }

  get view(): PaymentView {
    return this.state.view;
  }

  /** The provider that holds the payment now: the request's, or the fallback the charge failed over to. */
  get provider(): string {
    return this.state.view.provider;
  }

  /**
   * The scope of the charge's provider key: the plain one at the request's own provider (the key every payment had
   * before failover existed), the holder's after a failover, so the new provider gets a key of its own.
   */
  get keyScope(): KeyScope {
    const { merchantId, key } = this.input;
    return keyScope(merchantId, key, this.provider === this.request.provider ? undefined : this.provider);
  }

  /** The binding of the provider holding the payment; `NotReady` while it has none. */
  requireBinding(): ProviderBinding {
    if (!this.binding)
      throw ApplicationFailure.create({ type: 'NotReady', message: 'Provider activities not ready yet' });
    return this.binding;
  }

  reconcileEnding(ended: Promise<unknown>): void {
    this.reconcilesEnding += 1;
    void ended
      .catch(() => undefined)
      .finally(() => {
        this.reconcilesEnding -= 1;
      });
  }

  /** What the next run carries (continue-as-new): the payment's state and what this run learnt of its provider. */
  continuation(): ChargeContinuation {
    const binding = this.requireBinding();
    return {
      state: this.state,
      capabilities: binding.capabilities,
      // Shape 3: the worker's presets its first run recorded go with the payment (the input has none).
      ...(this.input.shape === 3 ? { retry: binding.retry ?? {} } : {}),
    };
  }

  /**
   * Registers the query, the updates and the signals; run before anything else so no message is missed. The signal
   * and update handlers run in `life`, the payment's scope that a cancellation request does not cancel (life-scope.ts).
   */
  registerHandlers(life: CancellationScope): void {
    const setHandler = setHandlerIn(life);
    setHandler(paymentQuery, () => this.state.view);
    setCurrentDetails(paymentCurrentDetails(this.state.view));
    // Answered in the accepting task, before any local activity's result (definitions.ts says why).
    setHandler(acceptUpdate, () => this.state.view, { validator: (args) => this.validateSubmit(args) });
    setHandler(webhookSignal, (event, from, handling) => this.onProviderEvent(event, from, handling));
    setHandler(ensureReconcileSignal, () => this.ensureReconcile());
    const requests = this.movementRequests;
    // A request acts only when the payment is ready for it (see readyForRequest).
    const ready = () => this.readyForRequest();
    const movementQueries = {
      check: (...args: MovementCheckArgs) => requests.check(...args),
      answer: (...args: MovementAnswerArgs) => requests.answer(...args),
    };
    serveRequest(setHandler, captureRequest, ready, {
      ...movementQueries,
      act: (args) => requests.capture(args),
      keep: (args, refusal) => requests.keepRefusal('capture', args.captureKey, args, refusal),
    });
    serveRequest(setHandler, refundRequest, ready, {
      ...movementQueries,
      act: (args) => requests.refund(args),
      keep: (args, refusal) => requests.keepRefusal('refund', args.refundKey, args, refusal),
    });
    setHandler(firstAnswerQuery, () => ({
      // Settled once the answer its repeats replay is recorded (runs from before it was recorded: the first call).
      settled: this.state.firstCallSettled && !firstAnswerDue(this.state),
      view: this.state.view,
      ...(this.state.firstAnswer ? { replay: this.state.firstAnswer } : {}),
    }));
    serveRequest(setHandler, resolveRequest, ready, {
      check: () => refusalOrNull(() => assertUnderReview(this.state)),
      // An operator's verdict: refused unless the payment is under review; a refused look-up is answered, not thrown.
      act: (args) => {
        assertUnderReview(this.state);
        return this.resolve(args);
      },
      keep: (args, refusal) => {
        const handled = { requestId: args.requestId, ...(refusal ? { refusal } : {}), atMs: Date.now() };
        keepAnswer((this.state.resolutions ??= []), handled, Date.now());
      },
      answer: (requestId) => this.resolveAnswer(requestId),
    });
    // The updates stay for payments whose history has them; the client sends requests (legacy-updates.ts).
    registerLegacyUpdates(setHandler, {
      submit: () => this.submit(),
      validateSubmit: (args) => this.validateSubmit(args),
      capture: (args) => requests.capture(args),
      validateCapture: (args) => requests.validateCapture(args),
      refund: (args) => requests.refund(args),
      validateRefund: (args) => requests.validateRefund(args),
      resolve: (args) => this.resolve(args),
      validateResolve: () => assertUnderReview(this.state),
    });
  }

  /** The payment's search attributes, unless the lean shape's starter already set them in the start request. */
  publishAttributes(): void {
    if (this.lean && workflowInfo().typedSearchAttributes.get(PaymentStatusAttr) !== undefined) return;
    upsertSearchAttributes([
      { key: PaymentStatusAttr, value: this.state.view.status },
      { key: MerchantIdAttr, value: this.input.merchantId },
      { key: OrderIdAttr, value: this.request.orderId },
      { key: ProviderAttr, value: this.provider },
    ]);
  }

  /**
   * A run that continued as new while the payment is unknown: its `StartTime` is later than when the payment became
   * unknown, so it publishes that time (`UnknownSince`) for the stuck-unknown sweep to find it by.
   */
  publishUnknownSince(): void {
    const since = this.state.view.unknownSince;
    if (this.state.view.status !== 'unknown' || since === undefined || !patched(PUBLISH_UNKNOWN_SINCE)) return;
    upsertSearchAttributes([{ key: UnknownSinceAttr, value: new Date(since) }]);
  }

  /** Binds the provider with the capabilities the payment has (input, continuation), else as its worker describes it. */
  async connectProvider(): Promise<void> {
    const { capabilities, retry } = this.recorded;
    // Shape 3's first run learns the worker's view with the create's first step (see createAtProvider).
    if (this.input.shape === 3 && capabilities === undefined) return;
    this.binding =
      capabilities === undefined
        ? await ProviderBinding.described(this.provider, retry)
        : ProviderBinding.of(this.provider, { capabilities, retry });
  }

  // ---- publishing what changed ----

  publish(): void {
    // The web UI's "current details": a query answer, no command, so no patch is needed.
    setCurrentDetails(paymentCurrentDetails(this.state.view));
    // State only, no command: the answer repeats replay is recorded where the status changes.
    recordFirstAnswer(this.state);
    if ((this.lean || patched(PUBLISH_ON_CHANGE)) && this.publishedStatus === this.state.view.status) return;
    this.publishedStatus = this.state.view.status;
    upsertSearchAttributes([{ key: PaymentStatusAttr, value: this.state.view.status }]);
  }

  /** Keeps the view's list of captures, refunds and voids in step with the sub-operations (and records their answers). */
  syncOperations(): void {
    if (this.state.subOperations.length > 0) this.state.view.operations = operationViews(this.state);
    recordOperationAnswers(this.state);
  }

  /**
   * What this task decided is read back the same by any retry of it: a view made of the input (with the starter's
   * `createdAt`) and decisions recorded outside the workflow (the ledger's debit, under its operation id, with its
   * time), so its news may be handed over before the task is recorded (payment-news.ts).
   */
  newsReproducible(): void {
    this.reproducibleNews = this.input.createdAt !== undefined;
  }

  /** Whether the news taken now is reproducible ({@link newsReproducible}); asked once, by the task's one take. */
  takeReproducibleNews(): boolean {
    const reproducible = this.reproducibleNews;
    this.reproducibleNews = false;
    return reproducible;
  }

  /** The first call settled: a final answer it gave is the one repeats of the payment's key replay. */
  firstCallAnswered(): void {
    recordFirstAnswer(this.state);
  }

  transition(status: PaymentStatus, reason?: string, at?: string): void {
    setStatus(this.state, status, at ?? nowIso(), reason);
    this.publish();
  }

  /** Applies what the provider says (forward only), settles a review it answers, and publishes the status. */
  learn(payment: ProviderPayment, at?: string): void {
    applyProviderPayment(this.state, payment, at ?? nowIso());
    this.afterProviderNews(at);
  }

  /** What the provider showed settles the review it answers: the payment leaves review, its operation is done. */
  private afterProviderNews(at?: string): void {
    const settled = reviewSatisfied(this.state);
    if (this.state.view.status === 'needs_review' && settled) {
      // The operation under review happened (the provider shows it): a repeat of its key answers it as succeeded. At
      // the news's own time, where it carries one.
      closeReview(this.state, 'done');
      this.transition(settled, undefined, at);
      this.syncOperations();
    }
    this.publish();
  }

  // ---- handlers ----

  /** `submit` (histories before `accept`): the early answer, the first provider call's result. */
  private async submit(): Promise<PaymentView> {
    const { timings } = this.input;
    // The lean shape leaves the short wait to the caller's own deadline (then 202 from a query): no timer in history.
    if (this.lean) await condition(() => this.state.firstCallSettled);
    else
      await condition(() => this.state.firstCallSettled, timings.submitWaitMs, {
        summary: `answer the caller within ${formatWait(timings.submitWaitMs)} (else 202)`,
      });
    return this.state.view;
  }

  private validateSubmit({ fingerprint }: SubmitArgs): void {
    if (fingerprint !== this.state.fingerprint) {
      throw ApplicationFailure.create({
        type: ErrorType.IdempotencyKeyReused,
        message: 'This idempotency key was used for a different payment request',
        nonRetryable: true,
      });
    }
  }

  /**
   * A provider webhook: applied once and forward only; it ends the wait of every reconcile it may answer. An event from
   * a provider that does not hold the payment (the one it failed over from never saw it) moves none of its money: the
   * sweep flags what that provider lists for this payment. `whenReady` (the router asks for it): it acts once everything
   * the other jobs of its workflow task set off has run ({@link whenSettled}), so at the same point whether it came
   * with a result or after one a query applied early (docs/sdk-update-ordering.md); it needs no first call settled
   * (it is news of that call) and acts at any wait, the create's and its reconcile's too. Events sent without it (old
   * histories) are applied at once, as they were.
   */
  private async onProviderEvent(event: ProviderEvent, from?: string, handling?: ProviderEventHandling): Promise<void> {
    if (handling?.whenReady) await whenSettled();
    if (from !== undefined && from !== this.provider && patched(EVENTS_FROM_HOLDER)) {
      log.warn('provider event from a provider that does not hold the payment ignored', {
        from,
        holder: this.provider,
        eventId: event.eventId,
      });
      return;
    }
    // When the API took it, never before the view's last change (absent in older signals: this task's clock).
    const at = stampOf(handling?.receivedAt, this.state.view.updatedAt);
    const changed = applyProviderEvent(this.state, event, at);
    if (!changed) return;
    this.afterProviderNews(at);
    // The wait-and-check ends early: the webhook told us what a lookup would have (each reconcile checks it against
    // its own expectation).
    const { merchantId, key } = this.input;
    const reconciling = [
      ...(this.reconcileRunning ? [reconcileWorkflowId(merchantId, 'create', key)] : []),
      ...this.state.subOperations
        .filter((o) => o.reconciling && o.kind !== 'void')
        .map((o) => reconcileWorkflowId(merchantId, o.kind, o.key)),
    ];
    for (const id of reconciling) {
      await getExternalWorkflowHandle(id)
        .signal(reconcileResolvedSignal, event.payment)
        .catch(() => undefined);
    }
  }

  /** The sweep: the payment has been unknown too long; reconcile again unless a reconcile is running. */
  private ensureReconcile(): void {
    if (this.state.view.status === 'unknown' && !this.reconcileRunning) this.reconcileWanted = true;
  }

  /** Runs one of the main line's waits with {@link parked} set. */
  async park<T>(wait: () => Promise<T>): Promise<T> {
    this.parked = true;
    try {
      return await wait();
    } finally {
      this.parked = false;
    }
  }

  /**
   * Where a request (signal) starts to act: once the first provider call settled and the main line is parked at a
   * wait, checked again one condition pass later, when everything the other jobs of its workflow task set off has run.
   * A request's commands then follow theirs both when it ran and on replay. Without this, a request that a worker
   * delivered after a result it had applied early (a query replays an uncached run past its last workflow task,
   * docs/sdk-update-ordering.md) is replayed before that result, and its commands move ahead of the result's.
   */
  private async readyForRequest(): Promise<void> {
    const ready = () => this.state.firstCallSettled && this.parked;
    for (;;) {
      await condition(ready);
      await condition(() => true);
      if (ready()) return;
    }
  }

  /** One operator request's answer: its refusal, or the view after it; null before it was handled. */
  private resolveAnswer(requestId: string): ResolveAnswer | null {
    const handled = this.state.resolutions?.find((r) => r.requestId === requestId);
    if (!handled) return null;
    return { ...(handled.refusal ? { refusal: handled.refusal } : {}), view: this.state.view };
  }

  /** `resolve`: an operator's verdict on the operation under review, checked at the provider (see OperatorReview). */
  private resolve(args: ResolveArgs): Promise<PaymentView> {
    return this.lock.run(() => this.verdicts.resolve(args));
  }

  /**
   * The authorization lapsed without a capture, or a cancellation request asked (`why`): void it (under the lock, like
   * every money movement).
   */
  voidExpiredAuthorization(why?: string): Promise<void> {
    return this.lock.run(() => this.movements.voidExpired(why));
  }
}
