/**
 * One open payment per order (docs/architecture.md "Identity and key scopes"), checked before a charge starts: a new
 * key for an order whose payment is still open is {@link PaymentInFlight}.
 */
import { WorkflowNotFoundError } from '@temporalio/client';
import { paymentQuery } from '../domain/definitions';
import { chargeWorkflowId, parseChargeWorkflowId } from '../domain/ids';
import { openPaymentsOfOrderQuery } from '../visibility';
import { type ClientContext, bounded, chargeHandle } from './context';
import { PaymentInFlight } from './errors';
import { paymentStatusOf } from './listed-status';

/** What the order check needs beyond the {@link ClientContext}. */
export interface OrderGuardContext extends ClientContext {
  /** Config `ORDER_SINGLE_FLIGHT`: false lets every key of an order charge. */
  readonly orderSingleFlight: boolean;
  /** Merchants that split an order into several payments: exempt (config `SPLIT_PAYMENT_MERCHANTS`). */
  readonly splitPaymentMerchants: ReadonlySet<string>;
  /** Orders with a charge being started in this process: the key that holds each, and how many requests for it. */
  readonly startingOrders: Map<string, { readonly key: string; requests: number }>;
}

/**
 * Runs `start` unless another key's payment of the order is open: refuses with {@link PaymentInFlight} when another
 * key of this order is being started in this process, or when Temporal visibility lists another key's payment of this
 * order as open. A repeat of the open payment's own key passes (it replays), and so does a repeat of any key that
 * already has a payment (it replays its own first answer, e.g. an earlier decline, never the other key's 409). What
 * this cannot see, and so does not prevent:
 * - visibility is eventually consistent: a payment started (in another process) a moment ago may not be indexed yet;
 *   its search attributes are set in its start request, so the gap is the server's indexing delay, not a workflow
 *   task, but it is not zero;
 * - two different keys for one order at the same instant on two API processes both pass the check and both charge.
 * Closing those needs a serialization point per order (e.g. a workflow per order id started with Update-with-Start);
 * this check stops the common case: the order service retrying under a new key minutes after an unknown answer.
 */
export async function guardOrder<T>(
  ctx: OrderGuardContext,
  merchant: string,
  paymentKey: string,
  orderId: string,
  start: () => Promise<T>,
): Promise<T> {
  if (!ctx.orderSingleFlight || ctx.splitPaymentMerchants.has(merchant)) return start();
  const orderKey = `${merchant}\n${orderId}`;
  const ownWorkflowId = chargeWorkflowId(merchant, paymentKey);
  const holder = ctx.startingOrders.get(orderKey);
  if (holder !== undefined && holder.key !== paymentKey) {
    if (await isKnownPayment(ctx, ownWorkflowId)) return start();
    throw new PaymentInFlight(holder.key);
  }
  const claim = holder ?? { key: paymentKey, requests: 0 };
  claim.requests += 1;
  ctx.startingOrders.set(orderKey, claim);
  try {
    const open = await openPaymentOfOrder(ctx, merchant, orderId, ownWorkflowId);
    if (open !== undefined && !(await isKnownPayment(ctx, ownWorkflowId))) throw new PaymentInFlight(open);
    return await start();
  } finally {
    claim.requests -= 1;
    if (claim.requests === 0) ctx.startingOrders.delete(orderKey);
  }
}

/**
 * Whether a payment exists under this workflow id: a known key replays its own first answer (or is refused as a
 * reused key), whatever holds its order now. Asked only when the order check would refuse, so a new key costs no read.
 */
async function isKnownPayment(ctx: ClientContext, workflowId: string): Promise<boolean> {
  try {
    await bounded(ctx, () => chargeHandle(ctx, workflowId).describe());
    return true;
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return false;
    throw err;
  }
}

/**
 * The key of another open payment of this order, from visibility: `pending`, `unknown` or `requires_action` (the
 * customer may still complete it), or `needs_review` while
 * nothing is authorized (the charge itself is undecided: an operator may still find it succeeded). A review of a
 * later capture or refund does not hold the order: its charge is decided, as for `authorized` or `succeeded`.
 */
async function openPaymentOfOrder(
  ctx: ClientContext,
  merchant: string,
  orderId: string,
  ownWorkflowId: string,
): Promise<string | undefined> {
  // One list for both kinds (each list is a visibility read on the server and a round trip here): a pending or
  // unknown one holds the order outright, one in review only while its charge is undecided.
  const others: { readonly workflowId: string; readonly inReview: boolean }[] = [];
  let nextPageToken: Uint8Array | undefined;
  do {
    const page = await bounded(ctx, () =>
      ctx.client.workflowService.listWorkflowExecutions({
        namespace: ctx.namespace,
        query: openPaymentsOfOrderQuery(merchant, orderId, ['pending', 'unknown', 'requires_action', 'needs_review']),
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
      const view = await bounded(ctx, () => chargeHandle(ctx, workflowId).query(paymentQuery));
      undecided = view.status === 'needs_review' && view.amountAuthorized === 0;
    } catch (err) {
      if (err instanceof WorkflowNotFoundError) undecided = false;
    }
    if (undecided) return parseChargeWorkflowId(workflowId)?.key ?? workflowId;
  }
  return undefined;
}
