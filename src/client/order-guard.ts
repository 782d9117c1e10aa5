/**
 * One open payment per order (docs/architecture.md "Identity and key scopes"), checked before a charge starts: a new
 * key for an order whose payment is still open is {@link PaymentInFlight}.
 */
import { WorkflowNotFoundError } from '@temporalio/client';
import { paymentQuery } from '../domain/definitions';
import { chargeWorkflowId, parseChargeWorkflowId } from '../domain/ids';
import type { OrderClaim, OrderClaimStore } from '../domain/order-claims';
import type { PaymentStatus } from '../domain/payment';
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
  /**
   * The order claims every API process on the database shares (src/db/order-claims.ts): absent, two processes can
   * both start a new key of one order at the same instant (each one's visibility check sees nothing yet).
   */
  readonly orderClaims?: OrderClaimStore;
  /** How long a claim holds its order against another key whose payment cannot be found (a start in flight). */
  readonly orderClaimWindowMs?: number;
}

/**
 * A claim's default window: beyond any start's own deadline (the start request and its wait, seconds) and the
 * visibility index's delay, so a start still in flight is never taken for a payment that does not exist.
 */
export const defaultOrderClaimWindowMs = 60_000;

/**
 * Runs `start` unless another key's payment of the order is open: refuses with {@link PaymentInFlight} when another
 * key of this order is being started in this process, when the order's claim (shared by every API process on the
 * database) is another key's whose payment is open or still being started, or when Temporal visibility lists another
 * key's payment of this order as open. A repeat of the open payment's own key passes (it replays), and so does a
 * repeat of any key that already has a payment (it replays its own first answer, e.g. an earlier decline, never the
 * other key's 409).
 *
 * Visibility alone is eventually consistent: a payment started in another process a moment ago may not be indexed
 * yet, so two keys for one order at the same instant on two API processes both passed it and both charged. The claim
 * closes that: a new key claims the order in one statement before its visibility check, and a claim younger than the
 * window (`orderClaimWindowMs`) that names another key holds the order until that key's payment is found settled.
 * Without a database (no `orderClaims`) that gap stays open.
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
    // The claim and the visibility list together (one wait, not two): the list matters only for payments whose claims
    // are past their window, long indexed by then, so it need not follow the claim.
    const claims = ctx.orderClaims;
    const listed = openPaymentOfOrder(ctx, merchant, orderId, ownWorkflowId);
    // Handled from now: a list that fails while the claim is out is no unhandled rejection (that ends the process);
    // the awaits below still see its failure.
    listed.catch(() => undefined);
    let claimed: OrderClaim | undefined;
    if (claims !== undefined) {
      const verdict = await claimOrder(ctx, claims, merchant, orderId, paymentKey, ownWorkflowId).catch(
        async (err: unknown) => {
          await listed.catch(() => undefined);
          throw err;
        },
      );
      if (verdict === 'known') {
        await listed.catch(() => undefined);
        return await start();
      }
      claimed = verdict;
    }
    // Refused or unanswered before anything started: the claim goes back (a later key is told which payment holds the
    // order, or is not held up by this request at all). At best: a claim left behind holds the order for its window.
    try {
      const open = await listed;
      if (open !== undefined && !(await isKnownPayment(ctx, ownWorkflowId))) throw new PaymentInFlight(open);
    } catch (err) {
      if (claimed) await claims?.release(merchant, orderId, claimed).catch(() => undefined);
      throw err;
    }
    return await start();
  } finally {
    claim.requests -= 1;
    if (claim.requests === 0) ctx.startingOrders.delete(orderKey);
  }
}

/**
 * Claims the order for this key across API processes: the claim (the order's claim is this key's now; visibility
 * still decides about payments older than the window), `known` (this key already has a payment: it replays, whatever
 * holds the order), or {@link PaymentInFlight} naming the key whose claim holds the order: its payment is open, or not
 * found while its claim is fresh (its start is in flight, in this or another process). A claim whose payment is found
 * settled is taken over (only if still exactly that claim: of two keys taking it over, one wins, the other finds it).
 */
async function claimOrder(
  ctx: OrderGuardContext,
  claims: OrderClaimStore,
  merchant: string,
  orderId: string,
  paymentKey: string,
  ownWorkflowId: string,
): Promise<OrderClaim | 'known'> {
  const windowMs = ctx.orderClaimWindowMs ?? defaultOrderClaimWindowMs;
  let holder: string | undefined;
  for (let round = 0; round < 3; round++) {
    const held = await claims.claim(merchant, orderId, paymentKey, windowMs);
    if (held === undefined) continue; // a claim committed while this one was made: read it again
    if (held.ours) return held;
    if (await isKnownPayment(ctx, ownWorkflowId)) return 'known';
    holder = held.paymentKey;
    if (await holdsOrder(ctx, chargeWorkflowId(merchant, holder))) break;
    const taken = await claims.takeOver(merchant, orderId, paymentKey, held);
    if (taken !== undefined) return taken;
  }
  // Still contended after three rounds (each answered by another key's claim): refusing never charges twice.
  throw new PaymentInFlight(holder ?? 'another key of this order');
}

/**
 * Whether the payment under this workflow id holds its order: not found (its start is in flight: only asked under a
 * fresh claim) or running with an open status (as {@link openPaymentOfOrder} reads them).
 */
async function holdsOrder(ctx: ClientContext, workflowId: string): Promise<boolean> {
  let described;
  try {
    described = await bounded(ctx, () => chargeHandle(ctx, workflowId).describe());
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return true;
    throw err;
  }
  if (described.status.name !== 'RUNNING') return false;
  const status = paymentStatusOf(described.raw.workflowExecutionInfo ?? {});
  if (status === undefined) return true; // set in every start request: unread, taken as open (never charges twice)
  if (!openStatuses.some((s) => s === status)) return false;
  return status !== 'needs_review' || (await undecidedInReview(ctx, workflowId));
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
        query: openPaymentsOfOrderQuery(merchant, orderId, openStatuses),
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
    if (await undecidedInReview(ctx, workflowId)) return parseChargeWorkflowId(workflowId)?.key ?? workflowId;
  }
  return undefined;
}

/** The statuses that may hold an order (`needs_review` only while nothing is authorized). */
const openStatuses: readonly PaymentStatus[] = ['pending', 'unknown', 'requires_action', 'needs_review'];

/** Whether a payment in review has nothing authorized yet (its charge undecided): it holds its order. */
async function undecidedInReview(ctx: ClientContext, workflowId: string): Promise<boolean> {
  try {
    const view = await bounded(ctx, () => chargeHandle(ctx, workflowId).query(paymentQuery));
    return view.status === 'needs_review' && view.amountAuthorized === 0;
  } catch (err) {
    // A payment we cannot read is taken as open: refusing is the side that never charges twice.
    return !(err instanceof WorkflowNotFoundError);
  }
}
