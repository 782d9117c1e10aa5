import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  type Client,
  QueryNotRegisteredError,
  ServiceError,
  WithStartWorkflowOperation,
  WorkflowExecutionAlreadyStartedError,
  WorkflowNotFoundError,
  WorkflowUpdateRPCTimeoutOrCancelledError,
  WorkflowUpdateStage,
  type WorkflowExecutionDescription,
  type WorkflowHandle,
} from '@temporalio/client';
import type { SignalDefinition } from '@temporalio/common';
import { ResolveReviewItemBody, ReviewItemId, type ReviewItemView } from '../domain/api-schemas';
import {
  type CaptureArgs,
  type MovementAnswer,
  type MovementCheck,
  type MovementRequest,
  type ProviderEvent,
  type RefundArgs,
  captureSignal,
  firstAnswerQuery,
  movementAnswerQuery,
  movementCheckQuery,
  paymentQuery,
  refundSignal,
  resolveAnswerQuery,
  resolveCheckQuery,
  resolveSignal,
  submitUpdate,
} from '../domain/definitions';
import { captureWorkflowId, chargeWorkflowId, parseChargeWorkflowId, refundWorkflowId } from '../domain/ids';
import { startingView } from '../domain/starting-view';
import {
  CaptureRequest,
  ChargeRequest,
  IdempotencyKey,
  MerchantId,
  type PaymentView,
  RefundRequest,
  ResolveRequest,
} from '../domain/payment';
import { type ReviewItemState, resolveReviewItemUpdate, reviewItemQuery } from '../domain/review-items';
import { MerchantIdAttr, OrderIdAttr, PaymentStatusAttr, ProviderAttr } from '../domain/search-attributes';
import type { KeyRecordReader } from '../domain/key-records';
import type { ChargeWorkflowInput, PaymentTimings } from '../domain/workflow-inputs';
import type { chargeWorkflow, reviewItemWorkflow } from '../workflows';
import {
  IdempotencyKeyReused,
  InvalidTransition,
  PaymentInFlight,
  PaymentNotFound,
  ReviewItemNotFound,
  ValidationError,
} from './errors';
import { paymentStaticDetails, paymentSummary } from '../domain/summaries';
import { captureFingerprint, chargeFingerprint, refundFingerprint } from './fingerprint';
import { operationAnswer, recordedAnswer } from './key-records';
import {
  isTemporalUnavailable,
  parseOrThrow,
  translateRefusal,
  translateUpdateFailure,
  updateFailureOf,
} from './failures';
import { type EventOwner, type ProviderEventDelivery, deliverProviderEvent } from './provider-events';
import { type StartReporting, startReporting } from './start-report';
import {
  type OperatorReviewItemView,
  type ReviewItemListOptions,
  type ReviewItemPage,
  operatorReviewItemView,
  reviewItemView,
} from './review-items';
import {
  type PaymentFilter,
  decodePageToken,
  encodePageToken,
  isVisibilityLiteral,
  openPaymentsOfOrderQuery,
  paymentListQuery,
  reviewItemListQuery,
  reviewItemWorkflowType,
} from '../visibility';
import { paymentStatusOf } from './listed-status';
import { verdictRefusal } from './verdict-refusal';

/** How a {@link PaymentsClient} starts and waits for payments. */
export interface PaymentsClientOptions {
  /** The workflow task queue (config `TASK_QUEUE`). */
  readonly taskQueue: string;
  /** Every delay of the payment workflows, passed to each new payment. */
  readonly timings: PaymentTimings;
  /** Default: the Temporal client's namespace. */
  readonly namespace?: string;
  /** How long capture and refund wait for their outcome before answering the current view; default `submitWaitMs`. */
  readonly operationWaitMs?: number;
  /** How long a webhook without metadata waits for visibility to index its payment; default 2000 ms. */
  readonly webhookMatchWaitMs?: number;
  /**
   * How long beyond `submitWaitMs` a charge may take at most when no worker takes its submit update: it then answers
   * from what Temporal durably has (202 when the payment was started, 503 when the start did not happen); the last
   * {@link describeBudgetMs} of it are for reading that. Default 2000 ms.
   */
  readonly submitMarginMs?: number;
  /**
   * Upper bound of each call to Temporal beyond the workflow's own waits (no worker, overloaded server); default
   * 10 000 ms. A call cut off throws a Temporal timeout: nothing is known to have failed, the caller may repeat.
   */
  readonly rpcTimeoutMs?: number;
  /**
   * The provider names the workers serve (config `providers`); a charge naming another is refused with a
   * {@link ValidationError} on `provider` before anything starts. Default `['simulator']`. Names only: the client holds
   * no provider capabilities and no retry presets. Every payment it starts takes history shape 3, whose first workflow
   * task records the worker's capabilities and `RETRY_*` presets (docs/provider-contract.md).
   */
  readonly providers?: readonly string[];
  /** The provider of a charge that names none (config `defaultProvider`); default the first of `providers`. */
  readonly defaultProvider?: string;
  /**
   * One open payment per order (config `ORDER_SINGLE_FLIGHT`, default true): while a payment for (merchant, orderId)
   * is pending, unknown or in review with its charge undecided, a new key for that order is refused with
   * {@link PaymentInFlight}.
   */
  readonly orderSingleFlight?: boolean;
  /** Merchants that split an order into several payments: exempt from `orderSingleFlight` (config `SPLIT_PAYMENT_MERCHANTS`). */
  readonly splitPaymentMerchants?: readonly string[];
  /**
   * Payments started by this client announce their status changes and refunds to their merchant's webhook endpoint
   * (config `MERCHANT_WEBHOOKS`; default false: the workers then need the merchant webhook setup, src/stack.ts).
   */
  readonly merchantEvents?: boolean;
  /**
   * The key-record table (docs/operations.md#key-records): payments started by this client hand their keys' first final
   * answers to it, and a repeat of a key answers its record first, so it replays (or is refused) even once the
   * workflow is gone. Absent: repeats are answered by the workflow alone, for as long as the namespace keeps it.
   */
  readonly keyRecords?: KeyRecordReader;
}

/**
 * A charge's answer: the view, and whether the payment already existed (a repeat of the same key and body);
 * `completed: false` when no worker answered in time and the view is the payment as Temporal started it (202).
 */
export interface ChargeResult {
  readonly view: PaymentView;
  readonly replayed: boolean;
  readonly completed?: boolean;
}

/**
 * A capture's or refund's answer: the view, whether the operation finished within the wait (else 202), and whether it
 * answers a repeat of the operation's key (its first final answer, or its progress while still moving).
 */
export interface OperationResult {
  readonly view: PaymentView;
  readonly completed: boolean;
  readonly replayed?: boolean;
}

/** A page of payments, newest first; `nextPageToken` when there are more. */
export interface PaymentPage {
  readonly payments: PaymentView[];
  readonly nextPageToken?: string;
}

/** Options of {@link PaymentsClient.list}. */
export interface ListOptions extends PaymentFilter {
  readonly pageToken?: string;
  readonly pageSize?: number;
}

/** Memo of a charge workflow: the fingerprint (compared on a closed run) and which request started it. */
interface ChargeMemo {
  readonly fingerprint?: string;
  readonly startedBy?: string;
}

type ChargeHandle = WorkflowHandle<typeof chargeWorkflow>;
type ReviewItemHandle = WorkflowHandle<typeof reviewItemWorkflow>;

/** The provider of a charge that names none, when no providers are configured (the one the worker builds today). */
const defaultProviderName = 'simulator';

/** `temporal.api.enums.v1.WorkflowExecutionStatus` values of a visibility listing. */
const ExecutionStatus = { Running: 1, Completed: 2 } as const;

/**
 * What the order service calls: charge, capture, refund, get, list and resolve, each scoped to one merchant. It never
 * retries: a repeat with the same key is idempotent, so the caller may repeat.
 */
export class PaymentsClient {
  private readonly namespace: string;
  private readonly operationWaitMs: number;
  private readonly rpcTimeoutMs: number;
  private readonly submitMarginMs: number;
  private readonly providers: ReadonlySet<string>;
  private readonly defaultProvider: string;
  private readonly splitPaymentMerchants: ReadonlySet<string>;
  /** Charges in flight in this process by workflow id and fingerprint: identical concurrent requests share one. */
  private readonly inflight = new Map<string, Promise<ChargeResult>>();
  /** Orders with a charge being started in this process: the key that holds each, and how many requests for it. */
  private readonly startingOrders = new Map<string, { readonly key: string; requests: number }>();
  /** Update-with-Start that says whether it created the run (see start-report.ts); built on the first charge. */
  private startReporting?: StartReporting;

  constructor(
    private readonly client: Client,
    private readonly options: PaymentsClientOptions,
  ) {
    this.namespace = options.namespace ?? client.options.namespace;
    this.operationWaitMs = options.operationWaitMs ?? options.timings.submitWaitMs;
    this.rpcTimeoutMs = options.rpcTimeoutMs ?? 10_000;
    this.submitMarginMs = options.submitMarginMs ?? 2_000;
    const providers = options.providers ?? [defaultProviderName];
    this.providers = new Set(providers);
    this.defaultProvider = options.defaultProvider ?? providers[0] ?? defaultProviderName;
    if (!this.providers.has(this.defaultProvider)) {
      throw new TypeError(`defaultProvider ${this.defaultProvider} is not one of the providers`);
    }
    this.splitPaymentMerchants = new Set(options.splitPaymentMerchants ?? []);
  }

  /**
   * Charges once per (merchant, key): starts the payment or attaches to it, and answers its early view. A provider
   * that is not configured is a {@link ValidationError}; a new key for an order whose payment is still open is
   * {@link PaymentInFlight} (see `orderSingleFlight`); neither starts anything.
   */
  async charge(merchantId: string, key: string, body: unknown): Promise<ChargeResult> {
    const { workflowId, merchant, paymentKey } = this.scope(merchantId, key);
    const request = this.parseCharge(body);
    const fingerprint = chargeFingerprint(request);
    const recorded = await recordedAnswer(this.options.keyRecords, 'charge', merchant, paymentKey, fingerprint);
    if (recorded) return { view: recorded, replayed: true };
    // Temporal limits in-flight updates per workflow (10 by default): a burst of identical requests to this process
    // becomes one update-with-start, and the others answer as repeats. Across processes the server dedups.
    const flightKey = `${workflowId}\n${fingerprint}`;
    const joined = this.inflight.get(flightKey);
    if (joined) return { view: (await joined).view, replayed: true };
    const flight = this.guardOrder(merchant, paymentKey, request.orderId, () =>
      this.startCharge(workflowId, merchant, paymentKey, request, fingerprint),
    );
    this.inflight.set(flightKey, flight);
    try {
      return await flight;
    } finally {
      this.inflight.delete(flightKey);
    }
  }

  /** The charge request with the configured default provider, refused unless its providers are all configured. */
  private parseCharge(body: unknown): ChargeRequest {
    const withProvider =
      typeof body === 'object' &&
      body !== null &&
      !Array.isArray(body) &&
      (body as { provider?: unknown }).provider === undefined
        ? { ...body, provider: this.defaultProvider }
        : body;
    const request = parseOrThrow(ChargeRequest, withProvider);
    const oneOf = `must be one of: ${[...this.providers].join(', ')}`;
    if (!this.providers.has(request.provider)) {
      // Nothing would ever serve its task queue: the payment would stay pending and burn the key.
      throw new ValidationError([{ path: 'provider', message: `provider ${oneOf}` }]);
    }
    const unknown = (request.fallbackProviders ?? []).flatMap((name, i) =>
      this.providers.has(name) ? [] : [{ path: `fallbackProviders.${i}`, message: `fallbackProviders ${oneOf}` }],
    );
    if (unknown.length > 0) throw new ValidationError(unknown);
    return request;
  }

  /**
   * One open payment per order (DESIGN.md "Identity and idempotency"), checked before the payment starts: refuses
   * with {@link PaymentInFlight} when another key of this order is being started in this process, or when Temporal
   * visibility lists another key's payment of this order as open. A repeat of the open payment's own key passes (it
   * replays), and so does a repeat of any key that already has a payment (it replays its own first answer, e.g. an
   * earlier decline, never the other key's 409). What this cannot see, and so does not prevent:
   * - visibility is eventually consistent: a payment started (in another process) a moment ago may not be indexed yet;
   *   its search attributes are set in its start request, so the gap is the server's indexing delay, not a workflow
   *   task, but it is not zero;
   * - two different keys for one order at the same instant on two API processes both pass the check and both charge.
   * Closing those needs a serialization point per order (e.g. a workflow per order id started with Update-with-Start);
   * this check stops the common case: the order service retrying under a new key minutes after an unknown answer.
   */
  private async guardOrder<T>(
    merchant: string,
    paymentKey: string,
    orderId: string,
    start: () => Promise<T>,
  ): Promise<T> {
    if (this.options.orderSingleFlight === false || this.splitPaymentMerchants.has(merchant)) return start();
    const orderKey = `${merchant}\n${orderId}`;
    const ownWorkflowId = chargeWorkflowId(merchant, paymentKey);
    const holder = this.startingOrders.get(orderKey);
    if (holder !== undefined && holder.key !== paymentKey) {
      if (await this.isKnownPayment(ownWorkflowId)) return start();
      throw new PaymentInFlight(holder.key);
    }
    const claim = holder ?? { key: paymentKey, requests: 0 };
    claim.requests += 1;
    this.startingOrders.set(orderKey, claim);
    try {
      const open = await this.openPaymentOfOrder(merchant, orderId, ownWorkflowId);
      if (open !== undefined && !(await this.isKnownPayment(ownWorkflowId))) throw new PaymentInFlight(open);
      return await start();
    } finally {
      claim.requests -= 1;
      if (claim.requests === 0) this.startingOrders.delete(orderKey);
    }
  }

  /**
   * Whether a payment exists under this workflow id: a known key replays its own first answer (or is refused as a
   * reused key), whatever holds its order now. Asked only when the order check would refuse, so a new key costs no read.
   */
  private async isKnownPayment(workflowId: string): Promise<boolean> {
    try {
      await this.bounded(() => this.handle(workflowId).describe());
      return true;
    } catch (err) {
      if (err instanceof WorkflowNotFoundError) return false;
      throw err;
    }
  }

  /**
   * The key of another open payment of this order, from visibility: `pending` or `unknown`, or `needs_review` while
   * nothing is authorized (the charge itself is undecided: an operator may still find it succeeded). A review of a
   * later capture or refund does not hold the order: its charge is decided, as for `authorized` or `succeeded`.
   */
  private async openPaymentOfOrder(
    merchant: string,
    orderId: string,
    ownWorkflowId: string,
  ): Promise<string | undefined> {
    // One list for both kinds (each list is a visibility read on the server and a round trip here): a pending or
    // unknown one holds the order outright, one in review only while its charge is undecided.
    const others: { readonly workflowId: string; readonly inReview: boolean }[] = [];
    let nextPageToken: Uint8Array | undefined;
    do {
      const page = await this.bounded(() =>
        this.client.workflowService.listWorkflowExecutions({
          namespace: this.namespace,
          query: openPaymentsOfOrderQuery(merchant, orderId, ['pending', 'unknown', 'needs_review']),
          pageSize: 20,
          ...(nextPageToken === undefined ? {} : { nextPageToken }),
        }),
      );
      for (const e of page.executions) {
        const workflowId = e.execution?.workflowId;
        if (typeof workflowId !== 'string' || workflowId === ownWorkflowId) continue;
        others.push({ workflowId, inReview: paymentStatusOf(e) === 'needs_review' });
      }
      // An open one decides at once; only payments in review (rare: bounded by the order's payments) read on.
      if (others.some((o) => !o.inReview)) break;
      nextPageToken = page.nextPageToken && page.nextPageToken.length > 0 ? page.nextPageToken : undefined;
    } while (nextPageToken !== undefined);
    const pending = others.find((o) => !o.inReview);
    if (pending !== undefined) return parseChargeWorkflowId(pending.workflowId)?.key ?? pending.workflowId;
    for (const { workflowId } of others) {
      let undecided = true; // a payment we cannot read is taken as open: refusing is the side that never charges twice
      try {
        const view = await this.bounded(() => this.handle(workflowId).query(paymentQuery));
        undecided = view.status === 'needs_review' && view.amountAuthorized === 0;
      } catch (err) {
        if (err instanceof WorkflowNotFoundError) undecided = false;
      }
      if (undecided) return parseChargeWorkflowId(workflowId)?.key ?? workflowId;
    }
    return undefined;
  }

  private async startCharge(
    workflowId: string,
    merchant: string,
    paymentKey: string,
    request: ChargeRequest,
    fingerprint: string,
  ): Promise<ChargeResult> {
    const input: ChargeWorkflowInput = {
      merchantId: merchant,
      key: paymentKey,
      fingerprint,
      request,
      timings: this.options.timings,
      // Shape 3: the worker owns the provider's capabilities and the retry presets, recorded in the payment's first
      // workflow task, so neither travels in the input (nor is held here: this client knows providers by name only).
      shape: 3,
      ...(this.options.merchantEvents === true ? { merchantEvents: true as const } : {}),
      ...(this.options.keyRecords === undefined ? {} : { keyRecords: true as const }),
    };
    const startedBy = randomUUID();
    const { orderId, amount, provider, capture } = request;
    const facts = { merchantId: merchant, key: paymentKey, orderId, amount, provider, capture };
    const startWorkflowOperation = new WithStartWorkflowOperation<typeof chargeWorkflow>('chargeWorkflow', {
      workflowId,
      taskQueue: this.options.taskQueue,
      // A repeat of a running payment is answered by query (startedWithoutAnswer), never by an update that would reach
      // the workflow in the middle of its life: only the first workflow task accepts `submit` (definitions.ts says why).
      workflowIdConflictPolicy: 'FAIL',
      // A closed payment is never charged again under its key: the repeat gets the stored result.
      workflowIdReusePolicy: 'REJECT_DUPLICATE',
      args: [input],
      memo: { fingerprint, startedBy } satisfies ChargeMemo,
      // What the web UI and `temporal workflow describe` show for the payment (no payment method, no description).
      staticSummary: paymentSummary(facts),
      staticDetails: paymentStaticDetails(facts),
      // In the start request, not only in the workflow's first task: visibility lists the payment as a pending one
      // of its order from its start, which is what one-open-payment-per-order checks (the workflow upserts the same).
      typedSearchAttributes: [
        { key: PaymentStatusAttr, value: 'pending' },
        { key: MerchantIdAttr, value: merchant },
        { key: OrderIdAttr, value: request.orderId },
        { key: ProviderAttr, value: request.provider },
      ],
    });
    // The submit update needs a worker; the start does not. One deadline for both: without a worker (all crashed,
    // deploying, overloaded) the answer comes at submitWaitMs + margin, from what Temporal durably has.
    const answerBy = Date.now() + this.options.timings.submitWaitMs + this.submitMarginMs;
    const deadline = answerBy - describeBudgetMs(this.submitMarginMs);
    try {
      const { result: view, report } = await this.starts.run(() =>
        this.submitLean(workflowId, fingerprint, startWorkflowOperation, deadline),
      );
      // The start response's `started` names the request that created the run; a `false` is read again from the memo
      // (a server that does not send the flag answers false), so only a repeat costs the describe.
      const startedHere = report.started === true || (await this.wasStartedBy(workflowId, startedBy));
      return { view, replayed: !startedHere };
    } catch (err) {
      if (err instanceof WorkflowExecutionAlreadyStartedError)
        return this.startedWithoutAnswer(workflowId, fingerprint, startedBy, input, err, answerBy);
      if (closedBeforeUpdate(err)) return this.replayClosed(workflowId, fingerprint, err);
      const typed = translateUpdateFailure(err);
      if (typed !== err || updateFailureOf(err) !== undefined) throw typed;
      return this.startedWithoutAnswer(workflowId, fingerprint, startedBy, input, err, answerBy);
    }
  }

  /**
   * Update-with-Start for the lean shape: the workflow answers `submit` when the first provider call settled, and this
   * client waits for that at most `submitWaitMs` (its own deadline, no timer in the workflow's history); past it the
   * current view answers (pending: 202), and the payment goes on. Without a worker neither acceptance nor the query
   * comes by `deadline`: the caller then answers from what Temporal durably has (see startedWithoutAnswer).
   */
  private async submitLean(
    workflowId: string,
    fingerprint: string,
    startWorkflowOperation: WithStartWorkflowOperation<typeof chargeWorkflow>,
    deadline: number,
  ): Promise<PaymentView> {
    const update = await this.client.connection.withDeadline(deadline, () =>
      this.starts.workflow.startUpdateWithStart(submitUpdate, {
        args: [{ fingerprint }],
        startWorkflowOperation,
        waitForStage: WorkflowUpdateStage.ACCEPTED,
      }),
    );
    try {
      return await this.client.connection.withDeadline(deadline, () => update.result());
    } catch (err) {
      if (!(err instanceof WorkflowUpdateRPCTimeoutOrCancelledError)) throw err;
      return this.client.connection.withDeadline(Math.max(deadline, Date.now() + 1_000), () =>
        this.handle(workflowId).query(paymentQuery),
      );
    }
  }

  /**
   * The submit update got no answer in time (no worker took it, or Temporal did not answer), or the payment existed
   * already (a repeat): whether the payment was started decides. Started (by this request or an identical one): it is
   * durable and goes on, so the answer is its view once its first provider call settled, read by query until
   * `answerBy`; without a worker to answer, its view as started (`pending`, 202). Not started: the original error (503,
   * the caller repeats with the same key). Started with another body under this key: {@link IdempotencyKeyReused}.
   */
  private async startedWithoutAnswer(
    workflowId: string,
    fingerprint: string,
    startedBy: string,
    input: ChargeWorkflowInput,
    original: unknown,
    answerBy: number,
  ): Promise<ChargeResult> {
    let description: WorkflowExecutionDescription;
    try {
      description = await this.client.connection.withDeadline(Math.max(answerBy, Date.now() + 250), () =>
        this.handle(workflowId).describe(),
      );
    } catch (describeFailure) {
      // A repeat (the start said "already started") that Temporal does not describe in time: it is busy, the payment
      // exists and goes on; the caller repeats (503). Never the start's own "already started" error (a 500).
      if (original instanceof WorkflowExecutionAlreadyStartedError) {
        throw isTemporalUnavailable(describeFailure)
          ? describeFailure
          : new ServiceError('The payment exists but Temporal did not describe it in time', {
              cause: describeFailure instanceof Error ? describeFailure : new Error(String(describeFailure)),
            });
      }
      // Not found: not started, nothing will happen under this key. Unreachable: the same answer. The caller repeats.
      throw original;
    }
    if (description.status.name !== 'RUNNING') return this.replayClosed(workflowId, fingerprint, original);
    if ((await this.storedFingerprint(description)) !== fingerprint) {
      throw new IdempotencyKeyReused('This idempotency key was used for a different payment request', {
        cause: original,
      });
    }
    const replayed = (description.memo as ChargeMemo | undefined)?.startedBy !== startedBy;
    const answered = await this.firstAnswer(workflowId, answerBy);
    if (answered) return { view: answered, replayed };
    const status = description.typedSearchAttributes.get(PaymentStatusAttr);
    const startedAt = description.startTime.toISOString();
    // Only the not-yet-settled statuses: a settled one comes with amounts this description does not carry.
    const view = startingView(input, status === 'unknown' ? 'unknown' : 'pending', startedAt);
    return { view, replayed, completed: false };
  }

  /**
   * What a repeat of a running payment answers: its first final answer once it has one, else its view once its first
   * provider call settled (its progress), read by query (nothing in history) until `answerBy`; past it the current
   * view if a worker answered at all, undefined if none did.
   */
  private async firstAnswer(workflowId: string, answerBy: number): Promise<PaymentView | undefined> {
    const handle = this.handle(workflowId);
    let last: PaymentView | undefined;
    try {
      const read = async () => {
        const answer = await this.client.connection.withDeadline(Math.max(answerBy, Date.now() + 250), () =>
          handle.query(firstAnswerQuery),
        );
        last = answer.view;
        return answer;
      };
      const answer = await readUntil(read, (a) => a.settled, answerBy);
      // Its first final answer once there is one; before that its progress (unknown, in review: a 202).
      return answer.replay ?? answer.view;
    } catch (err) {
      // A payment started before this query existed answers the plain view (its first call settled long ago).
      if (err instanceof QueryNotRegisteredError) return this.bounded(() => handle.query(paymentQuery));
      if (!isTemporalUnavailable(err)) throw err;
      return last; // no worker answered in time
    }
  }

  /** The payment's current view; {@link PaymentNotFound} for a missing key and for another merchant's. */
  async get(merchantId: string, key: string): Promise<PaymentView> {
    const { workflowId } = this.scope(merchantId, key);
    try {
      return await this.bounded(() => this.handle(workflowId).query(paymentQuery));
    } catch (err) {
      if (err instanceof WorkflowNotFoundError) throw new PaymentNotFound({ cause: err });
      throw err;
    }
  }

  /** One page of the merchant's payments from Temporal visibility, optionally by status and order id. */
  async list(merchantId: string, options: ListOptions = {}): Promise<PaymentPage> {
    const merchant = parseOrThrow(MerchantId, merchantId, 'merchantId');
    if (options.orderId !== undefined && !isVisibilityLiteral(options.orderId)) {
      throw new ValidationError([
        { path: 'orderId', message: 'a list filter cannot contain a backslash or a double quote' },
      ]);
    }
    const response = await this.bounded(() =>
      this.client.workflowService.listWorkflowExecutions({
        namespace: this.namespace,
        query: paymentListQuery(merchant, options),
        pageSize: options.pageSize ?? 20,
        nextPageToken: decodePageToken(options.pageToken),
      }),
    );
    const views = await this.bounded(() =>
      Promise.all(
        response.executions.map(async ({ execution }) => {
          if (!execution?.workflowId) return undefined;
          try {
            return await this.client.workflow
              .getHandle<typeof chargeWorkflow>(execution.workflowId, execution.runId ?? undefined)
              .query(paymentQuery);
          } catch (err) {
            if (err instanceof WorkflowNotFoundError) return undefined; // deleted since it was listed
            throw err;
          }
        }),
      ),
    );
    const nextPageToken = encodePageToken(response.nextPageToken);
    return {
      // Defence in depth: the query is scoped already.
      payments: views.filter((v): v is PaymentView => v !== undefined && v.merchantId === merchant),
      ...(nextPageToken === undefined ? {} : { nextPageToken }),
    };
  }

  /** Captures an authorized payment (all of it without an amount) under its own idempotency key. */
  async capture(merchantId: string, key: string, captureKey: string, body: unknown = {}): Promise<OperationResult> {
    const { workflowId, paymentKey } = this.scope(merchantId, key);
    const opKey = parseOrThrow(IdempotencyKey, captureKey, 'idempotencyKey');
    const request = parseOrThrow(CaptureRequest, body ?? {});
    const fingerprint = captureFingerprint(paymentKey, request);
    const args: CaptureArgs = {
      captureKey: opKey,
      fingerprint,
      ...(request.amount === undefined ? {} : { amount: request.amount }),
    };
    return this.moveMoney(workflowId, captureSignal, args, 'capture', opKey, fingerprint);
  }

  /** Refunds part or all of what was captured, under its own idempotency key. */
  async refund(merchantId: string, key: string, refundKey: string, body: unknown): Promise<OperationResult> {
    const { workflowId, paymentKey } = this.scope(merchantId, key);
    const opKey = parseOrThrow(IdempotencyKey, refundKey, 'idempotencyKey');
    const request = parseOrThrow(RefundRequest, body);
    const fingerprint = refundFingerprint(paymentKey, request);
    const args: RefundArgs = { refundKey: opKey, fingerprint, amount: request.amount };
    return this.moveMoney(workflowId, refundSignal, args, 'refund', opKey, fingerprint);
  }

  /**
   * An operator's verdict on a payment in `needs_review`, checked by the payment against a look-up at the provider:
   * {@link InvalidTransition} in any other status, {@link ProviderDisagrees} when the provider does not confirm it.
   */
  async resolve(merchantId: string, key: string, body: unknown, operator?: string): Promise<PaymentView> {
    const { workflowId } = this.scope(merchantId, key);
    const request = parseOrThrow(ResolveRequest, body);
    const handle = this.handle(workflowId);
    const requestId = randomUUID();
    // Asked first (nothing recorded for a refusal), then sent as a signal and answered by query, like capture/refund.
    try {
      const refusal = await this.bounded(() => handle.query(resolveCheckQuery));
      if (refusal) throw verdictRefusal(refusal);
      await this.bounded(() =>
        handle.signal(resolveSignal, { ...request, ...(operator === undefined ? {} : { operator }), requestId }),
      );
    } catch (err) {
      throw await this.translateClosedOrMissing(err, workflowId);
    }
    const answer = await readUntil(
      () => this.bounded(() => handle.query(resolveAnswerQuery, requestId)),
      (handled) => handled !== null,
      Date.now() + this.rpcTimeoutMs,
    );
    if (answer?.refusal) throw verdictRefusal(answer.refusal);
    if (answer) return answer.view;
    // Sent and durable, not yet handled (no worker, or its provider look-up is slow): the operator asks again.
    throw new ServiceError('The verdict was recorded but not applied in time');
  }

  /**
   * One page of the merchant's review items (the reconcile sweep's orphans and disagreements) from Temporal
   * visibility, open ones only unless `open: false`. Items without a merchant are for operators and never listed.
   */
  async listReviewItems(merchantId: string, options: ReviewItemListOptions = {}): Promise<ReviewItemPage> {
    const merchant = parseOrThrow(MerchantId, merchantId, 'merchantId');
    const response = await this.bounded(() =>
      this.client.workflowService.listWorkflowExecutions({
        namespace: this.namespace,
        query: reviewItemListQuery(merchant, { open: options.open ?? true }),
        pageSize: options.pageSize ?? 20,
        nextPageToken: decodePageToken(options.pageToken),
      }),
    );
    const views = await this.bounded(() =>
      Promise.all(
        response.executions.map(async ({ execution, status }) => {
          if (!execution?.workflowId) return undefined;
          const state = await this.reviewItemState(
            execution.workflowId,
            execution.runId ?? undefined,
            status === ExecutionStatus.Completed,
          );
          return state && reviewItemView(execution.workflowId, state, status === ExecutionStatus.Running);
        }),
      ),
    );
    const nextPageToken = encodePageToken(response.nextPageToken);
    return {
      // Defence in depth: the query is scoped already.
      items: views.filter((v): v is ReviewItemView => v !== undefined && v.merchantId === merchant),
      ...(nextPageToken === undefined ? {} : { nextPageToken }),
    };
  }

  /**
   * Resolves one of the merchant's open review items (its `resolveReviewItem` update) and answers the resolved item.
   * {@link ReviewItemNotFound} for a missing item, another merchant's and one without a merchant;
   * {@link InvalidTransition} when it is already resolved (or was closed otherwise).
   */
  async resolveReviewItem(
    merchantId: string,
    itemId: string,
    body: unknown,
    operator?: string,
  ): Promise<ReviewItemView> {
    const merchant = parseOrThrow(MerchantId, merchantId, 'merchantId');
    const { id, state } = await this.resolveItem(merchant, itemId, body, operator);
    const view = reviewItemView(id, state, false);
    if (!view) throw new ReviewItemNotFound(); // unreachable: it carried the merchant's id
    return view;
  }

  /**
   * An operator resolves any open review item, with or without a merchant; `operator` is recorded as who decided
   * (the API passes `operator:<operatorId>`). {@link ReviewItemNotFound} for a missing item;
   * {@link InvalidTransition} when it is already resolved (or was closed otherwise).
   */
  async resolveReviewItemAsOperator(itemId: string, body: unknown, operator: string): Promise<OperatorReviewItemView> {
    const { id, state } = await this.resolveItem(null, itemId, body, operator);
    return operatorReviewItemView(id, state, false);
  }

  /** Resolves an item the owner may see (`null`: an operator, who sees every item) and answers its new state. */
  private async resolveItem(
    owner: string | null,
    itemId: string,
    body: unknown,
    operator: string | undefined,
  ): Promise<{ id: string; state: ReviewItemState }> {
    const id = parseOrThrow(ReviewItemId, itemId, 'id');
    const request = parseOrThrow(ResolveReviewItemBody, body);
    const handle: ReviewItemHandle = this.client.workflow.getHandle<typeof reviewItemWorkflow>(id);
    // Ownership first (a foreign item answers exactly like a missing one), from the item's search attributes.
    const closed = await this.reviewItemClosedStatus(handle, owner);
    if (closed === 'COMPLETED') throw new InvalidTransition('This review item is already resolved');
    if (closed !== undefined) throw new InvalidTransition(`This review item is closed (${closed.toLowerCase()})`);
    try {
      const state = await this.bounded(() =>
        handle.executeUpdate(resolveReviewItemUpdate, {
          args: [{ ...request, ...(operator === undefined ? {} : { operator }) }],
        }),
      );
      return { id, state };
    } catch (err) {
      // Its validator refuses a second resolve (InvalidTransition); a run that closed meanwhile refuses any update.
      if (!(err instanceof WorkflowNotFoundError) && !closedBeforeUpdate(err)) throw translateUpdateFailure(err);
      const now = await this.reviewItemClosedStatus(handle, owner);
      if (now === undefined) throw err;
      throw new InvalidTransition(
        now === 'COMPLETED'
          ? 'This review item is already resolved'
          : `This review item is closed (${now.toLowerCase()})`,
        { cause: err },
      );
    }
  }

  /** The item's state: its result once completed (no replay needed), else its query; undefined when it is gone. */
  private async reviewItemState(
    workflowId: string,
    runId: string | undefined,
    completed: boolean,
  ): Promise<ReviewItemState | undefined> {
    const handle = this.client.workflow.getHandle<typeof reviewItemWorkflow>(workflowId, runId);
    try {
      return completed ? await handle.result() : await handle.query(reviewItemQuery);
    } catch (err) {
      if (err instanceof WorkflowNotFoundError) return undefined; // deleted since it was listed
      throw err;
    }
  }

  /**
   * Undefined while the item is running, else how it closed (`COMPLETED` = resolved); throws
   * {@link ReviewItemNotFound} unless the item exists and carries this merchant's `MerchantId` (any item for `null`,
   * an operator).
   */
  private async reviewItemClosedStatus(handle: ReviewItemHandle, merchant: string | null): Promise<string | undefined> {
    let description: WorkflowExecutionDescription;
    try {
      description = await this.bounded(() => handle.describe());
    } catch (err) {
      if (err instanceof WorkflowNotFoundError) throw new ReviewItemNotFound({ cause: err });
      throw err;
    }
    if (
      description.type !== reviewItemWorkflowType ||
      (merchant !== null && description.typedSearchAttributes.get(MerchantIdAttr) !== merchant)
    ) {
      throw new ReviewItemNotFound();
    }
    return description.status.name === 'RUNNING' ? undefined : description.status.name;
  }

  /**
   * Hands a verified provider event to the payment it belongs to (durably: the promise resolves once Temporal
   * accepted it), or parks it when no open payment owns it. `owner` comes from the event's metadata when present.
   */
  async deliverProviderEvent(
    provider: string,
    event: ProviderEvent,
    owner?: EventOwner,
  ): Promise<ProviderEventDelivery> {
    return deliverProviderEvent(
      {
        client: this.client,
        namespace: this.namespace,
        taskQueue: this.options.taskQueue,
        retainMs: this.options.timings.refundWindowMs,
        matchWaitMs: this.options.webhookMatchWaitMs ?? 2_000,
      },
      provider,
      event,
      owner,
    );
  }

  private get starts(): StartReporting {
    return (this.startReporting ??= startReporting(this.client));
  }

  private scope(merchantId: string, key: string) {
    const merchant = parseOrThrow(MerchantId, merchantId, 'merchantId');
    const paymentKey = parseOrThrow(IdempotencyKey, key, 'key');
    return { merchant, paymentKey, workflowId: chargeWorkflowId(merchant, paymentKey) };
  }

  /** Runs Temporal calls under a deadline: `rpcTimeoutMs` beyond what the workflow itself may take (`extraMs`). */
  private bounded<T>(fn: () => Promise<T>, extraMs = 0): Promise<T> {
    return this.client.connection.withDeadline(Date.now() + this.rpcTimeoutMs + extraMs, fn);
  }

  private handle(workflowId: string): ChargeHandle {
    return this.client.workflow.getHandle<typeof chargeWorkflow>(workflowId);
  }

  /** Whether this request's start created the run (the memo names the request that started it). */
  private async wasStartedBy(workflowId: string, startedBy: string): Promise<boolean> {
    const description = await this.handle(workflowId).describe();
    return (description.memo as ChargeMemo | undefined)?.startedBy === startedBy;
  }

  /** A repeat against a closed payment: the stored result for the same fingerprint, else the key was reused. */
  private async replayClosed(workflowId: string, fingerprint: string, original: unknown): Promise<ChargeResult> {
    const handle = this.handle(workflowId);
    let description: WorkflowExecutionDescription;
    try {
      description = await handle.describe();
    } catch (err) {
      if (err instanceof WorkflowNotFoundError) throw original;
      throw err;
    }
    if ((await this.storedFingerprint(description)) !== fingerprint) {
      throw new IdempotencyKeyReused('This idempotency key was used for a different payment request', {
        cause: original,
      });
    }
    return { view: await this.closedFirstAnswer(handle, description), replayed: true };
  }

  /**
   * A closed payment's first final answer. A declined or failed payment closed right after it (its result is that
   * answer); any other is read by query from its history (a worker replays it), since its result is the view at close
   * (after captures, refunds, a void). A run from before the answer was recorded answers what it has.
   */
  private async closedFirstAnswer(
    handle: ChargeHandle,
    description: WorkflowExecutionDescription,
  ): Promise<PaymentView> {
    const result = description.status.name === 'COMPLETED' ? await handle.result() : undefined;
    if (result?.status === 'declined' || result?.status === 'failed') return result;
    try {
      const { replay, view } = await this.bounded(() => handle.query(firstAnswerQuery));
      return replay ?? result ?? view;
    } catch (err) {
      if (err instanceof QueryNotRegisteredError && result !== undefined) return result;
      throw err;
    }
  }

  /** The fingerprint in the memo; a run that continued as new without its memo falls back to the chain's first run. */
  private async storedFingerprint(description: WorkflowExecutionDescription): Promise<string | undefined> {
    const own = (description.memo as ChargeMemo | undefined)?.fingerprint;
    const firstRunId = description.raw.workflowExecutionInfo?.firstRunId;
    if (own !== undefined || !firstRunId || firstRunId === description.runId) return own;
    const first = await this.client.workflow.getHandle(description.workflowId, firstRunId).describe();
    return (first.memo as ChargeMemo | undefined)?.fingerprint;
  }

  /**
   * Runs a capture or refund: the payment's rules are asked first (a query: a refusal records nothing), then the request
   * goes into the payment's history as a signal, and the caller waits at most `operationWaitMs` for the operation's
   * first provider call to settle, reading the answer by query (then the current view: the operation goes on in the
   * workflow). The answer follows the operation's own state, never the payment's alone: `succeeded` (the provider
   * confirmed it) is completed, a refusal by the provider throws {@link ProviderRejected}, anything still open is not
   * completed (202). A repeat of the key is answered by the operation it names, without a new effect.
   */
  private async moveMoney(
    workflowId: string,
    signal: SignalDefinition<[(CaptureArgs | RefundArgs) & MovementRequest]>,
    args: CaptureArgs | RefundArgs,
    kind: 'capture' | 'refund',
    opKey: string,
    fingerprint: string,
  ): Promise<OperationResult> {
    const merchant = parseChargeWorkflowId(workflowId)?.merchantId ?? '';
    const recorded = await recordedAnswer(this.options.keyRecords, kind, merchant, opKey, fingerprint);
    if (recorded) {
      const answer = operationAnswer(recorded, kind, opKey, true);
      if (answer) return answer;
    }
    const handle = this.handle(workflowId);
    await this.assertKeyNotUsedElsewhere(workflowId, kind, opKey);
    const requestId = randomUUID();
    let check: MovementCheck;
    // A repeat of a known key: answered by the operation's first final answer (its view when it succeeded, its
    // refusal), or its progress while it is still moving; all marked replayed.
    let replayed = false;
    try {
      check = await this.bounded(() => handle.query(movementCheckQuery, kind, args));
      if (check.refusal) throw translateRefusal(check.refusal) ?? new Error(check.refusal.message);
      replayed = check.known === true;
      // A repeat of a known key is answered from the workflow's record: nothing new goes into its history. (A key
      // whose try never left is not known: its repeat is sent, and tries again.)
      if (!replayed) await this.bounded(() => handle.signal(signal, { ...args, requestId }));
    } catch (err) {
      throw await this.translateClosedOrMissing(err, workflowId);
    }
    const answer = await this.awaitMovement(handle, kind, opKey, requestId, fingerprint, check.answeredByTry);
    if (answer?.refusal) throw translateRefusal(answer.refusal) ?? new Error(answer.refusal.message);
    const view = answer?.view ?? (await this.bounded(() => handle.query(paymentQuery)));
    const shown = answer === null ? undefined : operationAnswer(view, kind, opKey, replayed);
    return shown ?? { view, completed: false, replayed }; // not yet handled
  }

  /**
   * Reads one capture/refund request's answer (from the try the check named) until it is settled or
   * `operationWaitMs` passed. Null when the workflow has not handled the request by then.
   */
  private async awaitMovement(
    handle: ChargeHandle,
    kind: 'capture' | 'refund',
    opKey: string,
    requestId: string,
    fingerprint: string,
    answeredByTry: number | undefined,
  ): Promise<MovementAnswer | null> {
    return readUntil(
      () => this.bounded(() => handle.query(movementAnswerQuery, kind, opKey, requestId, fingerprint, answeredByTry)),
      (answer) => answer?.settled === true,
      Date.now() + this.operationWaitMs,
    );
  }

  /**
   * A capture or refund key belongs to its first request, merchant-wide: its child workflow (`<kind>:<merchant>:<key>`)
   * names the payment that ran it. A key already run under another payment is {@link IdempotencyKeyReused} before the
   * target payment's own rules are even asked (so the answer is 422, not a 409 about the other payment's state).
   * The payment's own child start (REJECT_DUPLICATE) stays the race-free guard; this only orders the answers.
   */
  private async assertKeyNotUsedElsewhere(workflowId: string, kind: 'capture' | 'refund', opKey: string) {
    const merchant = parseChargeWorkflowId(workflowId)?.merchantId;
    if (merchant === undefined) return;
    const childId = (kind === 'capture' ? captureWorkflowId : refundWorkflowId)(merchant, opKey);
    let parent: string | undefined;
    try {
      const description = await this.bounded(() => this.client.workflow.getHandle(childId).describe());
      parent = description.raw.workflowExecutionInfo?.parentExecution?.workflowId ?? undefined;
    } catch (err) {
      if (err instanceof WorkflowNotFoundError) return; // a new key
      throw err;
    }
    if (parent !== undefined && parent !== workflowId) {
      throw new IdempotencyKeyReused(`This idempotency key was used for a ${kind} of another payment`);
    }
  }

  /** Missing payment → {@link PaymentNotFound}; closed payment → {@link InvalidTransition}; rejections → typed. */
  private async translateClosedOrMissing(err: unknown, workflowId: string): Promise<unknown> {
    if (!(err instanceof WorkflowNotFoundError) && !closedBeforeUpdate(err)) return translateUpdateFailure(err);
    try {
      const description = await this.handle(workflowId).describe();
      return new InvalidTransition(`This payment is closed (${description.status.name.toLowerCase()})`, {
        cause: err,
      });
    } catch (describeErr) {
      if (describeErr instanceof WorkflowNotFoundError) return new PaymentNotFound({ cause: err });
      throw describeErr;
    }
  }
}

/** The part of the submit margin kept for reading whether the payment started (a describe): at most 750 ms. */
export const describeBudgetMs = (marginMs: number): number => Math.min(750, Math.floor(marginMs / 2));

/**
 * Reads `read` until `done` holds for its answer or `answerBy` passed, and answers the last read: how the client waits
 * for a workflow by query (nothing goes into its history; the pause grows from 10 to 200 ms).
 */
async function readUntil<T>(read: () => Promise<T>, done: (answer: T) => boolean, answerBy: number): Promise<T> {
  for (let pauseMs = 10; ; pauseMs = Math.min(pauseMs * 2, 200)) {
    const answer = await read();
    if (done(answer) || Date.now() + pauseMs > answerBy) return answer;
    await sleep(pauseMs);
  }
}

/** The payment's run closed before (or while) the update reached it. */
function closedBeforeUpdate(err: unknown): boolean {
  return (
    err instanceof WorkflowExecutionAlreadyStartedError ||
    err instanceof WorkflowNotFoundError ||
    updateFailureOf(err)?.type === 'AcceptedUpdateCompletedWorkflow'
  );
}
