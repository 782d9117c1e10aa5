/**
 * The sweep's Temporal-side activities: visibility queries, payment queries, `ensureReconcile` signals and review items.
 * Workflows cannot do I/O, so the sweep workflow calls these; each is idempotent (signals are, and review items are
 * started under a deterministic id), so a retry after a partial run repeats nothing harmful.
 */
import { Context } from '@temporalio/activity';
import { type Client, WorkflowExecutionAlreadyStartedError, WorkflowNotFoundError } from '@temporalio/client';
import type { SearchAttributePair } from '@temporalio/common';
import type { Logger } from 'pino';
import { attributeProviderPayment, metadataVerdict } from '../domain/adoption';
import { ensureReconcileSignal, paymentQuery } from '../domain/definitions';
import { chargeWorkflowId } from '../domain/ids';
import { IdempotencyKey, MerchantId, type PaymentView } from '../domain/payment';
import { type ReviewItemInput, reviewItemWorkflowId } from '../domain/review-items';
import { MerchantIdAttr, OrderIdAttr, PaymentStatusAttr, ProviderAttr } from '../domain/search-attributes';
import { type SweepFinding, compareWithOurs, maxListedReviewItems } from '../domain/sweep';
import type { ProviderPayment } from '../domain/provider-payment';
import {
  decodePageToken,
  encodePageToken,
  paymentsByReferenceQuery,
  reviewItemWorkflowType,
  stuckUnknownQuery,
} from '../visibility';

/**
 * `reviewItemWorkflow`'s signature, as the sweep starts it by name: activities sit below the workflows and never
 * import them (not even as types).
 */
type ReviewItemWorkflow = (input: ReviewItemInput) => Promise<unknown>;

/** What the sweep activities need: a Temporal client (its namespace is the one swept) and a logger. */
export interface SweepActivityDeps {
  readonly client: Client;
  readonly logger: Logger;
}

export interface EnsureReconcilesArgs {
  /** The workflow task queue whose payments are swept (one schedule per deployment). */
  readonly taskQueue: string;
  /** Epoch ms: a payment unknown since before this is stuck. */
  readonly unknownCutoffMs: number;
  readonly pageSize: number;
  readonly pageToken?: string;
}

export interface EnsureReconcilesResult {
  /** Listed by visibility (a superset: see {@link stuckUnknownQuery}). */
  readonly candidates: number;
  /** Confirmed by the payment's own query: unknown since before the cutoff. */
  readonly stuck: number;
  readonly signalled: number;
  readonly nextPageToken?: string;
}

export interface CheckProviderPaymentsArgs {
  readonly provider: string;
  readonly taskQueue: string;
  /** One page of the provider's list. */
  readonly payments: readonly ProviderPayment[];
  readonly unknownCutoffMs: number;
  /** The sweep run's workflow id, recorded on the review items it raises. */
  readonly flaggedBy: string;
}

export interface CheckProviderPaymentsResult {
  readonly checked: number;
  readonly orphans: number;
  readonly disagreements: number;
  readonly reviewItemsStarted: number;
  readonly reviewItems: string[];
}

/** Candidates per reference we look at; more payments than this for one order is itself worth a review. */
const maxCandidatesPerReference = 20;

/** Where a provider payment belongs. */
type Owner =
  | { readonly kind: 'payment'; readonly workflowId: string; readonly view: PaymentView }
  | {
      readonly kind: 'orphan';
      readonly finding: Extract<SweepFinding, { kind: 'orphan' }>;
      readonly merchantId?: string;
    };

/** Builds the sweep activities over an injected Temporal client (tests pass their own). */
export const createSweepActivities = (deps: SweepActivityDeps) => {
  const { client } = deps;
  const namespace = client.options.namespace;

  /** The payment's view, or null when its workflow does not exist (never started, or past retention). */
  const viewOf = async (workflowId: string): Promise<PaymentView | null> => {
    try {
      return await client.workflow.getHandle(workflowId).query(paymentQuery);
    } catch (err) {
      if (err instanceof WorkflowNotFoundError) return null;
      throw err;
    }
  };

  /**
   * Our payment for a provider payment: by the metadata the charge workflow sends on create (merchant + key name its
   * workflow). Metadata that names no payment of ours validly is an orphan: all merchants share one provider account,
   * so it is another merchant's or another integration's, never attributed by reference. Without metadata, by
   * visibility on reference and provider (see {@link attributeProviderPayment}): the one payment that records this
   * provider payment, else the only one still waiting for it whose every field matches; never "the only candidate".
   */
  const ownerOf = async (provider: string, taskQueue: string, p: ProviderPayment): Promise<Owner> => {
    const merchant = MerchantId.safeParse(p.metadata?.merchant_id);
    const key = IdempotencyKey.safeParse(p.metadata?.payment_key);
    const merchantId = merchant.success ? merchant.data : undefined;
    if (merchant.success && key.success) {
      const workflowId = chargeWorkflowId(merchant.data, key.data);
      const view = await viewOf(workflowId);
      if (view) return { kind: 'payment', workflowId, view };
      return {
        kind: 'orphan',
        merchantId,
        finding: { kind: 'orphan', reason: 'unmatched', detail: 'its metadata names a payment we do not have' },
      };
    }
    const unmatched = (detail: string): Owner => ({
      kind: 'orphan',
      ...(merchantId === undefined ? {} : { merchantId }),
      finding: { kind: 'orphan', reason: 'unmatched', detail },
    });
    if (metadataVerdict(p.metadata, { merchantId: '', key: '' }) !== 'silent') {
      return unmatched('its metadata names no payment of ours');
    }
    let query: string;
    try {
      query = paymentsByReferenceQuery(provider, p.reference, taskQueue);
    } catch {
      // a reference visibility cannot express is not one of our order ids
      return unmatched('no payment of ours has its metadata or reference');
    }
    const response = await client.workflowService.listWorkflowExecutions({
      namespace,
      query,
      pageSize: maxCandidatesPerReference,
    });
    const ids = [
      ...new Set(response.executions.flatMap((e) => (e.execution?.workflowId ? [e.execution.workflowId] : []))),
    ];
    const candidates = (await Promise.all(ids.map(async (id) => ({ workflowId: id, view: await viewOf(id) })))).flatMap(
      (c) => (c.view ? [{ workflowId: c.workflowId, view: c.view }] : []),
    );
    if (candidates.length === 0) return unmatched('no payment of ours has its metadata or reference');
    const attribution = attributeProviderPayment(p, candidates);
    if (attribution.kind === 'owner') return { kind: 'payment', ...attribution.candidate };
    if (attribution.kind === 'unmatched') {
      // Not "the only payment of this order, so ours": without metadata it may be another merchant's.
      return unmatched(`none of the ${candidates.length} payments of ours with its reference records it or matches it`);
    }
    return {
      kind: 'orphan',
      ...(merchantId === undefined ? {} : { merchantId }),
      finding: {
        kind: 'orphan',
        reason: 'ambiguous',
        detail: `${attribution.count} payments of ours could own it and none records it`,
      },
    };
  };

  /** Starts the review item unless one exists (running or resolved); true when this call created it. */
  const raise = async (taskQueue: string, item: ReviewItemInput): Promise<{ workflowId: string; started: boolean }> => {
    const workflowId = reviewItemWorkflowId(item.provider, item.providerPaymentId);
    const searchAttributes: SearchAttributePair[] = [
      { key: PaymentStatusAttr, value: 'needs_review' },
      { key: ProviderAttr, value: item.provider },
      { key: OrderIdAttr, value: item.reference },
      ...(item.merchantId === undefined ? [] : [{ key: MerchantIdAttr, value: item.merchantId }]),
    ];
    try {
      await client.workflow.start<ReviewItemWorkflow>(reviewItemWorkflowType, {
        workflowId,
        taskQueue,
        args: [item],
        // The server's id uniqueness is the dedup: a running item is not started twice (FAIL), and a resolved one is
        // not raised again (REJECT_DUPLICATE). FAIL rather than USE_EXISTING, so we learn whether this call created it.
        workflowIdConflictPolicy: 'FAIL',
        workflowIdReusePolicy: 'REJECT_DUPLICATE',
        // Set at start, so the item is in the needs_review filter before a worker has run its first task.
        typedSearchAttributes: searchAttributes,
      });
      return { workflowId, started: true };
    } catch (err) {
      if (err instanceof WorkflowExecutionAlreadyStartedError) return { workflowId, started: false };
      throw err;
    }
  };

  return {
    /**
     * One visibility page of charge workflows stuck in `unknown`: confirms each with its query (visibility lags) and
     * signals `ensureReconcile`, on which the charge workflow starts a reconcile unless one is running.
     */
    async ensureReconcilesForStuckPayments(args: EnsureReconcilesArgs): Promise<EnsureReconcilesResult> {
      const ctx = Context.current();
      const response = await client.workflowService.listWorkflowExecutions({
        namespace,
        query: stuckUnknownQuery(args.taskQueue, args.unknownCutoffMs),
        pageSize: args.pageSize,
        nextPageToken: decodePageToken(args.pageToken),
      });
      let stuck = 0;
      let signalled = 0;
      for (const { execution } of response.executions) {
        ctx.heartbeat();
        if (!execution?.workflowId) continue;
        const view = await viewOf(execution.workflowId);
        if (view?.status !== 'unknown') continue;
        if (Date.parse(view.unknownSince ?? view.createdAt) >= args.unknownCutoffMs) continue;
        stuck += 1;
        try {
          await client.workflow.getHandle(execution.workflowId).signal(ensureReconcileSignal);
          signalled += 1;
        } catch (err) {
          if (!(err instanceof WorkflowNotFoundError)) throw err; // closed since the query: nothing to ensure
        }
      }
      const nextPageToken = encodePageToken(response.nextPageToken);
      deps.logger.info({ candidates: response.executions.length, stuck, signalled }, 'sweep: stuck unknown payments');
      return {
        candidates: response.executions.length,
        stuck,
        signalled,
        ...(nextPageToken === undefined ? {} : { nextPageToken }),
      };
    },

    /**
     * Compares one page of provider payments with ours and raises a review item for every orphan and disagreement.
     */
    async checkProviderPayments(args: CheckProviderPaymentsArgs): Promise<CheckProviderPaymentsResult> {
      const ctx = Context.current();
      let orphans = 0;
      let disagreements = 0;
      let reviewItemsStarted = 0;
      const reviewItems: string[] = [];
      for (const p of args.payments) {
        ctx.heartbeat();
        const owner = await ownerOf(args.provider, args.taskQueue, p);
        const finding =
          owner.kind === 'payment'
            ? compareWithOurs(owner.view, p, args.unknownCutoffMs, args.provider)
            : owner.finding;
        if (finding.kind !== 'orphan' && finding.kind !== 'disagreement') continue;
        if (finding.kind === 'orphan') orphans += 1;
        else disagreements += 1;
        const merchantId = owner.kind === 'payment' ? owner.view.merchantId : owner.merchantId;
        const item: ReviewItemInput = {
          provider: args.provider,
          providerPaymentId: p.id,
          reference: p.reference,
          kind: finding.kind,
          ...(finding.kind === 'orphan' ? { orphanReason: finding.reason } : {}),
          detail: finding.detail,
          payment: p,
          ...(merchantId === undefined ? {} : { merchantId }),
          ...(owner.kind === 'payment'
            ? {
                ours: {
                  workflowId: owner.workflowId,
                  status: owner.view.status,
                  amount: owner.view.amount.value,
                  currency: owner.view.amount.currency,
                },
              }
            : {}),
          flaggedBy: args.flaggedBy,
        };
        const raised = await raise(args.taskQueue, item);
        if (raised.started) reviewItemsStarted += 1;
        if (reviewItems.length < maxListedReviewItems) reviewItems.push(raised.workflowId);
        deps.logger.warn(
          {
            provider: args.provider,
            providerPaymentId: p.id,
            finding: finding.kind,
            ...(finding.kind === 'orphan' ? { reason: finding.reason } : {}),
            reviewItem: raised.workflowId,
            started: raised.started,
          },
          'sweep: flagged a provider payment',
        );
      }
      return { checked: args.payments.length, orphans, disagreements, reviewItemsStarted, reviewItems };
    },
  };
};

/** The sweep activities' type, for `proxyActivities<SweepActivities>` (type import only). */
export type SweepActivities = ReturnType<typeof createSweepActivities>;
