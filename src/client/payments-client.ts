/**
 * `PaymentsClient`: what the order service calls, a small façade over one file per conversation, each a set of
 * functions over the shared context (context.ts): starting a charge (charges.ts, its order check and its answers),
 * requests to a running payment (money-requests.ts, verdicts.ts, over request-protocol.ts), reads (reads.ts), review
 * items (review-items.ts) and provider events (provider-events.ts).
 */
import type { Client } from '@temporalio/client';
import type { KeyRecordReader } from '../domain/key-records';
import type { OrderClaimStore } from '../domain/order-claims';
import type { ReviewItemView } from '../domain/api-schemas';
import type { ProviderEvent } from '../domain/definitions';
import type { PaymentView } from '../domain/payment';
import type { PaymentTimings } from '../domain/workflow-inputs';
import type { WalletDebiter, WalletReader } from '../domain/wallets';
import type { ChargeResult } from './charge-answers';
import { type ChargeContext, charge } from './charges';
import type { ClientContext } from './context';
import { type MoneyRequestContext, type OperationResult, capture, refund } from './money-requests';
import {
  type EventOwner,
  type EventRoutingContext,
  type ProviderEventDelivery,
  deliverProviderEvent,
} from './provider-events';
import { type ListOptions, type PaymentPage, getPayment, listPayments } from './reads';
import {
  type OperatorReviewItemView,
  type ReviewItemListOptions,
  type ReviewItemPage,
  listReviewItems,
  resolveReviewItem,
  resolveReviewItemAsOperator,
} from './review-items';
import { startReporting } from './start-report';
import { resolve } from './verdicts';

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
   * `describeBudgetMs` (charges.ts) of it are for reading that. Default 2000 ms.
   */
  readonly submitMarginMs?: number;
  /**
   * Upper bound of each call to Temporal beyond the workflow's own waits (no worker, overloaded server); default
   * 10 000 ms. A call cut off throws a Temporal timeout: nothing is known to have failed, the caller may repeat.
   */
  readonly rpcTimeoutMs?: number;
  /**
   * The provider names the workers serve (config `providers`); a charge naming another is refused with a
   * `ValidationError` on `provider` before anything starts. Default `['simulator']`. Names only: the client holds
   * no provider capabilities and no retry presets. Every payment it starts takes history shape 3, whose first workflow
   * task records the worker's capabilities and `RETRY_*` presets (docs/provider-contract.md).
   */
  readonly providers?: readonly string[];
  /** The provider of a charge that names none (config `defaultProvider`); default the first of `providers`. */
  readonly defaultProvider?: string;
  /**
   * One open payment per order (config `ORDER_SINGLE_FLIGHT`, default true): while a payment for (merchant, orderId)
   * is pending, unknown or in review with its charge undecided, a new key for that order is refused with
   * `PaymentInFlight`.
   */
  readonly orderSingleFlight?: boolean;
  /** Merchants that split an order into several payments: exempt from `orderSingleFlight` (config `SPLIT_PAYMENT_MERCHANTS`). */
  readonly splitPaymentMerchants?: readonly string[];
  /**
   * The order claims every API process on the database shares (`OrderClaims`, docs/operations.md#order-claims): a new
   * key claims its order before its visibility check, so two keys of one order sent at the same instant to two
   * processes cannot both start. Absent (no database): `orderSingleFlight` reads visibility alone, which a start a
   * moment old may not be in yet.
   */
  readonly orderClaims?: OrderClaimStore;
  /** How long a claim holds its order against a key whose payment is not found yet (default 60 s). */
  readonly orderClaimWindowMs?: number;
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
  /**
   * The wallet ledger (docs/http-api.md#payments-with-a-wallet-part): a charge's wallet part is checked against it
   * (the wallet exists, in the charge's currency) before anything starts. Absent: a charge with a wallet part is 400.
   * A ledger that also debits (`WalletLedger` does) answers a wallet-only payment from the ledger's decision as soon as
   * the payment is started, without waiting for a worker (src/client/wallet-only.ts).
   */
  readonly wallets?: WalletReader & Partial<WalletDebiter>;
}

/** The provider of a charge that names none, when no providers are configured (the one the worker builds today). */
const defaultProviderName = 'simulator';

/**
 * What the order service calls: charge, capture, refund, get, list and resolve, each scoped to one merchant, review
 * items and provider events. It never retries: a repeat with the same key is idempotent, so the caller may repeat.
 */
export class PaymentsClient {
  private readonly reads: ClientContext;
  private readonly charges: ChargeContext;
  private readonly moneyRequests: MoneyRequestContext;
  private readonly events: EventRoutingContext;

  constructor(client: Client, options: PaymentsClientOptions) {
    const namespace = options.namespace ?? client.options.namespace;
    this.reads = {
      client,
      namespace,
      rpcTimeoutMs: options.rpcTimeoutMs ?? 10_000,
      ...(options.keyRecords === undefined ? {} : { keyRecords: options.keyRecords }),
    };
    this.moneyRequests = { ...this.reads, operationWaitMs: options.operationWaitMs ?? options.timings.submitWaitMs };
    const providers = options.providers ?? [defaultProviderName];
    const defaultProvider = options.defaultProvider ?? providers[0] ?? defaultProviderName;
    if (!providers.includes(defaultProvider)) {
      throw new TypeError(`defaultProvider ${defaultProvider} is not one of the providers`);
    }
    let starts: ReturnType<typeof startReporting> | undefined;
    this.charges = {
      ...this.reads,
      taskQueue: options.taskQueue,
      timings: options.timings,
      submitMarginMs: options.submitMarginMs ?? 2_000,
      providers: new Set(providers),
      defaultProvider,
      orderSingleFlight: options.orderSingleFlight !== false,
      splitPaymentMerchants: new Set(options.splitPaymentMerchants ?? []),
      ...(options.orderClaims === undefined ? {} : { orderClaims: options.orderClaims }),
      ...(options.orderClaimWindowMs === undefined ? {} : { orderClaimWindowMs: options.orderClaimWindowMs }),
      merchantEvents: options.merchantEvents === true,
      ...(options.wallets === undefined ? {} : { wallets: options.wallets }),
      startingOrders: new Map(),
      inflight: new Map(),
      // Built on the first charge (see start-report.ts).
      starts: () => (starts ??= startReporting(client)),
    };
    this.events = {
      client,
      namespace,
      taskQueue: options.taskQueue,
      retainMs: options.timings.refundWindowMs,
      matchWaitMs: options.webhookMatchWaitMs ?? 2_000,
    };
  }

  /**
   * Charges once per (merchant, key): starts the payment or attaches to it, and answers its early view. A provider
   * that is not configured is a `ValidationError`; a new key for an order whose payment is still open is
   * `PaymentInFlight` (see `orderSingleFlight`); neither starts anything.
   */
  charge(merchantId: string, key: string, body: unknown): Promise<ChargeResult> {
    return charge(this.charges, merchantId, key, body);
  }

  /** The payment's current view; `PaymentNotFound` for a missing key and for another merchant's. */
  get(merchantId: string, key: string): Promise<PaymentView> {
    return getPayment(this.reads, merchantId, key);
  }

  /** One page of the merchant's payments from Temporal visibility, optionally by status and order id. */
  list(merchantId: string, options: ListOptions = {}): Promise<PaymentPage> {
    return listPayments(this.reads, merchantId, options);
  }

  /** Captures an authorized payment (all of it without an amount) under its own idempotency key. */
  capture(merchantId: string, key: string, captureKey: string, body: unknown = {}): Promise<OperationResult> {
    return capture(this.moneyRequests, merchantId, key, captureKey, body);
  }

  /** Refunds part or all of what was captured, under its own idempotency key. */
  refund(merchantId: string, key: string, refundKey: string, body: unknown): Promise<OperationResult> {
    return refund(this.moneyRequests, merchantId, key, refundKey, body);
  }

  /**
   * An operator's verdict on a payment in `needs_review`, checked by the payment against a look-up at the provider:
   * `InvalidTransition` in any other status, `ProviderDisagrees` when the provider does not confirm it.
   */
  resolve(merchantId: string, key: string, body: unknown, operator?: string): Promise<PaymentView> {
    return resolve(this.reads, merchantId, key, body, operator);
  }

  /**
   * One page of the merchant's review items (the reconcile sweep's orphans and disagreements) from Temporal
   * visibility, open ones only unless `open: false`. Items without a merchant are for operators and never listed.
   */
  listReviewItems(merchantId: string, options: ReviewItemListOptions = {}): Promise<ReviewItemPage> {
    return listReviewItems(this.reads, merchantId, options);
  }

  /**
   * Resolves one of the merchant's open review items (its `resolveReviewItem` update) and answers the resolved item.
   * `ReviewItemNotFound` for a missing item, another merchant's and one without a merchant;
   * `InvalidTransition` when it is already resolved (or was closed otherwise).
   */
  resolveReviewItem(merchantId: string, itemId: string, body: unknown, operator?: string): Promise<ReviewItemView> {
    return resolveReviewItem(this.reads, merchantId, itemId, body, operator);
  }

  /**
   * An operator resolves any open review item, with or without a merchant; `operator` is recorded as who decided
   * (the API passes `operator:<operatorId>`). `ReviewItemNotFound` for a missing item;
   * `InvalidTransition` when it is already resolved (or was closed otherwise).
   */
  resolveReviewItemAsOperator(itemId: string, body: unknown, operator: string): Promise<OperatorReviewItemView> {
    return resolveReviewItemAsOperator(this.reads, itemId, body, operator);
  }

  /**
   * Hands a verified provider event to the payment it belongs to (durably: the promise resolves once Temporal
   * accepted it), or parks it when no open payment owns it. `owner` comes from the event's metadata when present.
   */
  deliverProviderEvent(provider: string, event: ProviderEvent, owner?: EventOwner): Promise<ProviderEventDelivery> {
    return deliverProviderEvent(this.events, provider, event, owner);
  }
}
