/**
 * Starting a charge: once per (merchant, key), with Update-with-Start, answering the payment's early view; a repeat,
 * a closed payment and a start no worker answered are answered from what Temporal has (charge-answers.ts).
 */
import { randomUUID } from 'node:crypto';
import {
  WithStartWorkflowOperation,
  WorkflowExecutionAlreadyStartedError,
  WorkflowUpdateRPCTimeoutOrCancelledError,
  WorkflowUpdateStage,
  type WorkflowStartOptions,
} from '@temporalio/client';
import { acceptUpdate, paymentQuery } from '../domain/definitions';
import { ChargeRequest, type PaymentView } from '../domain/payment';
import { MerchantIdAttr, OrderIdAttr, PaymentStatusAttr, ProviderAttr } from '../domain/search-attributes';
import { paymentStaticDetails, paymentSummary } from '../domain/summaries';
import type { ChargeWorkflowInput, PaymentTimings } from '../domain/workflow-inputs';
import type { chargeWorkflow } from '../workflows';
import {
  type ChargeMemo,
  type ChargeResult,
  firstAnswer,
  replayClosed,
  startedWithoutAnswer,
  wasStartedBy,
} from './charge-answers';
import { chargeHandle, paymentScope } from './context';
import { ValidationError } from './errors';
import { closedBeforeUpdate, parseOrThrow, translateUpdateFailure, updateFailureOf } from './failures';
import { chargeFingerprint } from './fingerprint';
import { recordedAnswer } from './key-records';
import { type OrderGuardContext, guardOrder } from './order-guard';
import type { StartReporting } from './start-report';
import type { WalletDebiter, WalletReader } from '../domain/wallets';
import { checkWalletPart } from './wallet-part';
import { chargeWalletOnly, walletDebiterFor } from './wallet-only';

/** What starting a charge needs beyond the {@link OrderGuardContext}. */
export interface ChargeContext extends OrderGuardContext {
  /** The workflow task queue (config `TASK_QUEUE`). */
  readonly taskQueue: string;
  /** Payments started announce their status changes and refunds to their merchant's webhook endpoint. */
  readonly merchantEvents: boolean;
  /** Every delay of the payment workflows, passed to each new payment. */
  readonly timings: PaymentTimings;
  /** How long beyond `submitWaitMs` a charge may take at most when no worker takes its submit update. */
  readonly submitMarginMs: number;
  /** The provider names the workers serve; a charge naming another is refused. */
  readonly providers: ReadonlySet<string>;
  /** The provider of a charge that names none. */
  readonly defaultProvider: string;
  /** Charges in flight in this process by workflow id and fingerprint: identical concurrent requests share one. */
  readonly inflight: Map<string, Promise<ChargeResult>>;
  /**
   * The wallet ledger a charge's wallet part is checked against; absent: a charge with a wallet part is refused. One
   * that debits too answers a wallet-only payment from its own debit (src/client/wallet-only.ts).
   */
  readonly wallets?: WalletReader & Partial<WalletDebiter>;
  /** Update-with-Start that says whether it created the run (see start-report.ts), built on the first charge. */
  readonly starts: () => StartReporting;
}

/** The part of the submit margin kept for reading whether the payment started (a describe): at most 750 ms. */
export const describeBudgetMs = (marginMs: number): number => Math.min(750, Math.floor(marginMs / 2));

/**
 * Charges once per (merchant, key): starts the payment or attaches to it, and answers its early view. A provider
 * that is not configured is a {@link ValidationError}; a new key for an order whose payment is still open is
 * `PaymentInFlight` (see `orderSingleFlight`); neither starts anything.
 */
export async function charge(
  ctx: ChargeContext,
  merchantId: string,
  key: string,
  body: unknown,
): Promise<ChargeResult> {
  const { workflowId, merchant, paymentKey } = paymentScope(merchantId, key);
  const request = parseCharge(ctx, body);
  const fingerprint = chargeFingerprint(request);
  const recorded = await checkedRecordedAnswer(ctx, merchant, paymentKey, request, fingerprint);
  if (recorded) return { view: recorded, replayed: true };
  // Temporal limits in-flight updates per workflow (10 by default): a burst of identical requests to this process
  // becomes one update-with-start, and the others answer as repeats. Across processes the server dedups.
  const flightKey = `${workflowId}\n${fingerprint}`;
  const joined = ctx.inflight.get(flightKey);
  if (joined) return { view: (await joined).view, replayed: true };
  const flight = guardOrder(ctx, merchant, paymentKey, request.orderId, () =>
    startCharge(ctx, workflowId, merchant, paymentKey, request, fingerprint),
  );
  ctx.inflight.set(flightKey, flight);
  try {
    return await flight;
  } finally {
    ctx.inflight.delete(flightKey);
  }
}

/**
 * The charge's checks that read the database, as one wait: its wallet part's (the wallet exists, in the charge's
 * currency) and its key's record (the first answer of a key whose workflow is gone). Two independent reads on two of
 * the pool's connections, made together: a wallet payment waits for one round trip, not two. Answered as if in turn:
 * the wallet part's refusal (400) first, then the record's (422 for another body; a database failure is a 503), then
 * the recorded answer, if any.
 */
async function checkedRecordedAnswer(
  ctx: ChargeContext,
  merchant: string,
  paymentKey: string,
  request: ChargeRequest,
  fingerprint: string,
): Promise<PaymentView | undefined> {
  const [wallet, record] = await Promise.allSettled([
    checkWalletPart(ctx.wallets, merchant, request),
    recordedAnswer(ctx.keyRecords, 'charge', merchant, paymentKey, fingerprint),
  ]);
  if (wallet.status === 'rejected') throw wallet.reason;
  if (record.status === 'rejected') throw record.reason;
  return record.value;
}

/** The charge request with the configured default provider, refused unless its providers are all configured. */
function parseCharge(ctx: ChargeContext, body: unknown): ChargeRequest {
  const withProvider =
    typeof body === 'object' &&
    body !== null &&
    !Array.isArray(body) &&
    (body as { provider?: unknown }).provider === undefined
      ? { ...body, provider: ctx.defaultProvider }
      : body;
  const request = parseOrThrow(ChargeRequest, withProvider);
  const oneOf = `must be one of: ${[...ctx.providers].join(', ')}`;
  if (!ctx.providers.has(request.provider)) {
    // Nothing would ever serve its task queue: the payment would stay pending and burn the key.
    throw new ValidationError([{ path: 'provider', message: `provider ${oneOf}` }]);
  }
  const unknown = (request.fallbackProviders ?? []).flatMap((name, i) =>
    ctx.providers.has(name) ? [] : [{ path: `fallbackProviders.${i}`, message: `fallbackProviders ${oneOf}` }],
  );
  if (unknown.length > 0) throw new ValidationError(unknown);
  return request;
}

async function startCharge(
  ctx: ChargeContext,
  workflowId: string,
  merchant: string,
  paymentKey: string,
  request: ChargeRequest,
  fingerprint: string,
): Promise<ChargeResult> {
  // A wallet-only payment with a ledger that debits: the API answers it from the ledger (src/client/wallet-only.ts).
  const debiter = walletDebiterFor(ctx, request);
  const input: ChargeWorkflowInput = {
    merchantId: merchant,
    key: paymentKey,
    fingerprint,
    request,
    timings: ctx.timings,
    // Shape 3: the worker owns the provider's capabilities and the retry presets, recorded in the payment's first
    // workflow task, so neither travels in the input (nor is held here: this client knows providers by name only).
    shape: 3,
    ...(ctx.merchantEvents ? { merchantEvents: true as const } : {}),
    ...(ctx.keyRecords === undefined ? {} : { keyRecords: true as const }),
    // The workflow's first answer carries the API's time of creation: the API's answer and its are one body.
    ...(debiter ? { createdAt: new Date().toISOString() } : {}),
  };
  const startedBy = randomUUID();
  const { orderId, amount, provider, capture } = request;
  const facts = { merchantId: merchant, key: paymentKey, orderId, amount, provider, capture, wallet: request.wallet };
  const startOptions = {
    workflowId,
    taskQueue: ctx.taskQueue,
    // A repeat of a running payment is answered by query (startedWithoutAnswer), never by an update that would reach
    // the workflow in the middle of its life: only the first workflow task accepts `accept` (definitions.ts says why).
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
  } satisfies WorkflowStartOptions<typeof chargeWorkflow> & { workflowIdConflictPolicy: 'FAIL' };
  // The submit update needs a worker; the start does not. One deadline for both: without a worker (all crashed,
  // deploying, overloaded) the answer comes at submitWaitMs + margin, from what Temporal durably has.
  const answerBy = Date.now() + ctx.timings.submitWaitMs + ctx.submitMarginMs;
  const deadline = answerBy - describeBudgetMs(ctx.submitMarginMs);
  if (debiter !== undefined) {
    // The ledger decides it: the API answers from its own debit once the payment is durable.
    return chargeWalletOnly(ctx, debiter, {
      workflowId,
      fingerprint,
      startedBy,
      input,
      startOptions,
      deadline,
      answerBy,
    });
  }
  const startWorkflowOperation = new WithStartWorkflowOperation<typeof chargeWorkflow>('chargeWorkflow', startOptions);
  try {
    const { result: view, report } = await ctx
      .starts()
      .run(() => submitLean(ctx, workflowId, fingerprint, startWorkflowOperation, deadline));
    // The start response's `started` names the request that created the run; a `false` is read again from the memo
    // (a server that does not send the flag answers false), so only a repeat costs the describe.
    const startedHere = report.started === true || (await wasStartedBy(ctx, workflowId, startedBy));
    return { view, replayed: !startedHere };
  } catch (err) {
    if (err instanceof WorkflowExecutionAlreadyStartedError)
      return startedWithoutAnswer(ctx, workflowId, fingerprint, startedBy, input, err, answerBy);
    if (closedBeforeUpdate(err)) return replayClosed(ctx, workflowId, fingerprint, err);
    const typed = translateUpdateFailure(err);
    if (typed !== err || updateFailureOf(err) !== undefined) throw typed;
    return startedWithoutAnswer(ctx, workflowId, fingerprint, startedBy, input, err, answerBy);
  }
}

/**
 * Update-with-Start for the lean shape: the workflow answers `accept` at once, and this client reads the first
 * provider call's answer by query for at most `submitWaitMs` (its own deadline, nothing in the workflow's history);
 * past it the current view answers (pending: 202), and the payment goes on. Without a worker neither acceptance nor the query
 * comes by `deadline`: the caller then answers from what Temporal durably has (see startedWithoutAnswer).
 */
async function submitLean(
  ctx: ChargeContext,
  workflowId: string,
  fingerprint: string,
  startWorkflowOperation: WithStartWorkflowOperation<typeof chargeWorkflow>,
  deadline: number,
): Promise<PaymentView> {
  const update = await ctx.client.connection.withDeadline(deadline, () =>
    ctx.starts().workflow.startUpdateWithStart(acceptUpdate, {
      args: [{ fingerprint }],
      startWorkflowOperation,
      waitForStage: WorkflowUpdateStage.ACCEPTED,
    }),
  );
  try {
    const view = await ctx.client.connection.withDeadline(deadline, () => update.result());
    // `accept` answers at once (definitions.ts says why): the first call's answer is read by query, as a repeat's is.
    if (view.status !== 'pending') return view;
    return (await firstAnswer(ctx, workflowId, deadline)) ?? view;
  } catch (err) {
    if (!(err instanceof WorkflowUpdateRPCTimeoutOrCancelledError)) throw err;
    return ctx.client.connection.withDeadline(Math.max(deadline, Date.now() + 1_000), () =>
      chargeHandle(ctx, workflowId).query(paymentQuery),
    );
  }
}
