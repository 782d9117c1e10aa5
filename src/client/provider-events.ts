/**
 * Routing of verified provider events (webhooks) to the payment they belong to. An event is acknowledged only after
 * Temporal durably accepted it: signalled to the payment's workflow, or parked in a workflow of its own.
 */
import { type Client, WorkflowNotFoundError } from '@temporalio/client';
import { type Attribution, attributeProviderPayment } from '../domain/adoption';
import { type ProviderEvent, type ProviderPayment, paymentQuery, webhookSignal } from '../domain/definitions';
import { chargeWorkflowId, parseChargeWorkflowId } from '../domain/ids';
import { type ParkReason, type ParkedEventInput, parkedEventWorkflowId } from '../domain/parked-events';
import type { PaymentView } from '../domain/payment';
import { isVisibilityLiteral, paymentsByReferenceQuery } from '../visibility';
import { readUntil } from './read-until';

/** Our payment named by the event's metadata. */
export interface EventOwner {
  readonly merchantId: string;
  readonly key: string;
}

/** Where an event went: its payment's workflow, a parked-event workflow, or nowhere because it was already applied. */
export type ProviderEventDelivery = 'payment' | 'parked' | 'duplicate';

/** What routing needs from the client. */
export interface EventRoutingContext {
  readonly client: Client;
  readonly namespace: string;
  readonly taskQueue: string;
  /** How long a parked-event workflow waits for more events before it completes. */
  readonly retainMs: number;
  /** How long to wait for visibility to index a just-started payment when matching by reference. */
  readonly matchWaitMs: number;
}

const MATCH_POLL_MS = 200;

/** Signals the event to its payment, or parks it; resolves once Temporal accepted it. */
export async function deliverProviderEvent(
  ctx: EventRoutingContext,
  provider: string,
  event: ProviderEvent,
  owner?: EventOwner,
): Promise<ProviderEventDelivery> {
  if (owner) {
    const workflowId = chargeWorkflowId(owner.merchantId, owner.key);
    const outcome = await signalPayment(ctx, workflowId, provider, event);
    if (outcome === 'signalled') return 'payment';
    if (outcome === 'known') return 'duplicate';
    if (outcome === 'closed') return closedPayment(ctx, workflowId, provider, event);
    return park(ctx, provider, event, 'unmatched', owner);
  }
  const candidates = await findByReference(ctx, provider, event.payment.reference);
  const attribution = await choose(ctx, candidates, event.payment);
  if (attribution.kind !== 'owner') return park(ctx, provider, event, attribution.kind);
  const chosen = attribution.candidate.id;
  const outcome = await signalPayment(ctx, chosen, provider, event);
  if (outcome === 'signalled') return 'payment';
  if (outcome === 'known') return 'duplicate';
  if (outcome === 'closed') return closedPayment(ctx, chosen, provider, event);
  return park(ctx, provider, event, 'unmatched');
}

async function signalPayment(
  ctx: EventRoutingContext,
  workflowId: string,
  provider: string,
  event: ProviderEvent,
): Promise<'signalled' | 'known' | 'closed' | 'missing'> {
  const handle = ctx.client.workflow.getHandle(workflowId);
  // Most webhooks confirm what the payment already knows (its own call's answer): a query, which costs the payment no
  // history and no action, tells; only news is signalled. A query that fails decides nothing: signal then.
  // This query may be the one that replays an uncached run past its last workflow task (a result applied early), and
  // the signal then lands in the window before that task: `whenReady` makes the payment apply it at the same point
  // either way (docs/sdk-update-ordering.md).
  const known = await handle.query(paymentQuery).catch(() => undefined);
  if (known && settledView(known) && reflects(known, event.payment)) return 'known';
  try {
    await handle.signal(webhookSignal, event, provider, { whenReady: true, receivedAt: new Date().toISOString() });
    return 'signalled';
  } catch (err) {
    if (!(err instanceof WorkflowNotFoundError)) throw err;
  }
  try {
    await handle.describe();
    return 'closed';
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return 'missing';
    throw err;
  }
}

/** A late event for a closed payment: nothing to do if its final view shows it already, else an operator looks. */
async function closedPayment(
  ctx: EventRoutingContext,
  workflowId: string,
  provider: string,
  event: ProviderEvent,
): Promise<ProviderEventDelivery> {
  const view = await ctx.client.workflow.getHandle(workflowId).query(paymentQuery);
  if (reflects(view, event.payment)) return 'duplicate';
  const owner = parseChargeWorkflowId(workflowId);
  return park(
    ctx,
    provider,
    event,
    'payment_closed',
    owner ? { merchantId: owner.merchantId, key: owner.key } : undefined,
  );
}

/** A view no provider news is waited for: not pending, unknown or under review (there the event must reach the run). */
const settledView = (view: PaymentView): boolean =>
  view.status !== 'pending' && view.status !== 'unknown' && view.status !== 'needs_review';

/** True when the view already accounts for everything the provider's payment shows. */
export function reflects(view: PaymentView, payment: ProviderPayment): boolean {
  if (view.providerPaymentId !== payment.id) return false;
  if (view.amountCaptured < payment.amountCaptured || view.amountRefunded < payment.amountRefunded) return false;
  if (payment.status === 'voided') return view.status === 'voided';
  return view.amountAuthorized > 0 || view.status === 'voided';
}

/** Charge workflows of this order at this provider; waits briefly for visibility to index a just-started one. */
async function findByReference(ctx: EventRoutingContext, provider: string, reference: string): Promise<string[]> {
  if (!isVisibilityLiteral(reference)) return []; // not one of our order ids (OrderId is searchable), or unmatchable
  const list = async () => {
    const response = await ctx.client.workflowService.listWorkflowExecutions({
      namespace: ctx.namespace,
      query: paymentsByReferenceQuery(provider, reference),
      pageSize: 20,
    });
    return [...new Set(response.executions.flatMap((e) => (e.execution?.workflowId ? [e.execution.workflowId] : [])))];
  };
  // Every MATCH_POLL_MS until one is listed; the last read once `matchWaitMs` has passed (readUntil reads no more once
  // the next pause would end past its answer-by, so that is one pause beyond the wait).
  const answerBy = Date.now() + ctx.matchWaitMs + MATCH_POLL_MS;
  return readUntil(list, (ids) => ids.length > 0, answerBy, { firstMs: MATCH_POLL_MS, maxMs: MATCH_POLL_MS });
}

/**
 * The one candidate that owns the provider payment (see {@link attributeProviderPayment}): with metadata, only the
 * payment it names; without, the one whose view carries its id, else the only one still waiting for its provider
 * payment whose amount, currency, reference and creation time all match. Never just "the only payment of this order":
 * all merchants share one provider account, so the order's payment at the provider may be another merchant's.
 */
async function choose(
  ctx: EventRoutingContext,
  candidates: readonly string[],
  payment: ProviderPayment,
): Promise<Attribution<{ id: string; view: PaymentView }>> {
  const views = await Promise.all(
    candidates.map(async (id) => ({ id, view: await ctx.client.workflow.getHandle(id).query(paymentQuery) })),
  );
  return attributeProviderPayment(payment, views);
}

/** Keeps the event in `provider-event:<provider>:<providerPaymentId>` (started if needed, deduplicated there). */
async function park(
  ctx: EventRoutingContext,
  provider: string,
  event: ProviderEvent,
  reason: ParkReason,
  owner?: EventOwner,
): Promise<ProviderEventDelivery> {
  const input: ParkedEventInput = {
    provider,
    providerPaymentId: event.payment.id,
    reference: event.payment.reference,
    reason,
    retainMs: ctx.retainMs,
    ...(owner === undefined ? {} : { merchantId: owner.merchantId, paymentKey: owner.key }),
  };
  await ctx.client.workflow.signalWithStart('parkedProviderEventWorkflow', {
    workflowId: parkedEventWorkflowId(provider, event.payment.id),
    taskQueue: ctx.taskQueue,
    args: [input],
    signal: webhookSignal,
    signalArgs: [event],
  });
  return 'parked';
}
