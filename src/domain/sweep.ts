/**
 * The reconcile sweep, which a schedule runs over payments stuck in `unknown` (docs/operations.md#finding-them): its
 * input, result, the window it compares with the provider, and the pure rule that compares one provider payment with
 * ours.
 */
import { providerAmountOf } from './wallet-operations';
import { z } from 'zod';
import type { ProviderPayment } from './definitions';
import { type PaymentView, ProviderName } from './payment';
import type { SweepWindow } from './sweep-window';
import { RetryOverridesSchema } from './workflow-inputs';

export * from './sweep-window';

const Ms = z.number().int().positive().max(Number.MAX_SAFE_INTEGER);
const EpochMs = z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER);

/** Input of `reconcileSweepWorkflow`. A schedule passes the same input to every run, so nothing here is per-run. */
export const SweepInput = z.strictObject({
  /** The providers (as configured on the worker) whose payments are compared with ours. */
  providers: z.array(ProviderName).min(1).max(16),
  /** How often the schedule runs the sweep. */
  intervalMs: Ms,
  /**
   * How far behind the run's time the provider window ends: at least the settle window, so a payment whose create
   * call, webhook or first reconcile check is still in flight is not compared (it would look like a disagreement).
   */
  lookbackMs: EpochMs,
  /** Width of the provider window; default twice the interval, so one skipped or failed run leaves no gap. */
  windowMs: Ms.optional(),
  /** A payment `unknown` for longer than this gets a live reconcile (`timings.unknownSweepThresholdMs`). */
  unknownThresholdMs: Ms,
  /**
   * The worker's retry overrides (`RETRY_*`), the same presets its charges get: the sweep's look-ups and lists retry
   * as a payment's reconcile does. Absent (schedules written before it): the built-in presets.
   */
  retry: RetryOverridesSchema.optional(),
  /** Page size of visibility and provider lists (the provider API allows at most 100). */
  pageSize: z.number().int().min(1).max(100).optional(),
  /** Provider pages per provider and run; a run that hits it says `truncated`. */
  maxProviderPages: z.number().int().min(1).max(1_000).optional(),
  /** Visibility pages of stuck payments per run; a run that hits it says `truncated`. */
  maxStuckPages: z.number().int().min(1).max(100).optional(),
  /** An explicit provider window (epoch ms, `[fromMs, toMs)`) for a backfill or a test, instead of the derived one. */
  window: z
    .strictObject({ fromMs: EpochMs, toMs: EpochMs })
    .refine((w) => w.fromMs < w.toMs, { message: 'window.fromMs must be before window.toMs' })
    .optional(),
});
export type SweepInput = z.infer<typeof SweepInput>;

/** How often the sweep schedule runs unless configured (`SWEEP_INTERVAL_MS`). */
export const defaultSweepIntervalMs = 10 * 60_000;

/** How far behind a run its provider window ends unless configured (`SWEEP_LOOKBACK_MS`): twice the settle window. */
export const defaultSweepLookbackMs = (settleWindowMs: number): number => 2 * settleWindowMs;

/** What one sweep run did. */
export interface SweepResult {
  /** Charge workflows still running in `unknown` for longer than the threshold. */
  stuckUnknown: number;
  /** Of those, the ones signalled `ensureReconcile` (each then has a live reconcile). */
  reconcilesEnsured: number;
  providerPaymentsChecked: number;
  /** Provider payments no payment of ours accounts for (unknown to us, a second charge, or not attributable). */
  orphans: number;
  /** Provider payments whose payment of ours says otherwise (status or amount). */
  disagreements: number;
  /** Review items this run created (a flag raised by an earlier run is not raised again). */
  reviewItemsStarted: number;
  /** Workflow ids of the review items this run flagged, new or existing (the first {@link maxListedReviewItems}). */
  reviewItems: string[];
  window: SweepWindow;
  /** A limit (pages) cut this run short; the rest waits for the next run (stuck payments) or a backfill. */
  truncated: boolean;
}

/** Why a provider payment is an orphan. */
export type OrphanReason =
  /** No payment of ours is named by its metadata, records it, or (without metadata) matches it in every field. */
  | 'unmatched'
  /**
   * Our payment it belongs to records another provider payment, or is held at another provider (a failover moves a
   * payment only when the provider it left never saw it): this one is a second charge.
   */
  | 'second_charge'
  /** Several payments of ours could own it and none records it. */
  | 'ambiguous';

/** The verdict on one provider payment. Only `orphan` and `disagreement` are flagged for an operator. */
export type SweepFinding =
  | { readonly kind: 'agrees' }
  /** Our payment is already in `needs_review`: an operator is on it. */
  | { readonly kind: 'in_review' }
  /** Ours is pending or unknown, younger than the threshold: its reconcile will find this payment. */
  | { readonly kind: 'reconciling' }
  | { readonly kind: 'orphan'; readonly reason: OrphanReason; readonly detail: string }
  | { readonly kind: 'disagreement'; readonly detail: string };

/** The fields of a provider payment the comparison reads. */
export type ComparedProviderPayment = Pick<ProviderPayment, 'id' | 'status' | 'amount' | 'currency'>;

/**
 * Compares a provider payment listed at `listedAt` with the payment of ours it was matched to. Only the creation is
 * compared: captures, refunds and voids happen later than the window and each has its own workflow and reconcile. A
 * voided provider payment moved no money, so it disagrees with nothing.
 */
export function compareWithOurs(
  ours: PaymentView,
  theirs: ComparedProviderPayment,
  unknownCutoffMs: number,
  listedAt?: string,
): SweepFinding {
  if (listedAt !== undefined && listedAt !== ours.provider) {
    return {
      kind: 'orphan',
      reason: 'second_charge',
      detail: `our payment is held at ${ours.provider}, not at ${listedAt}`,
    };
  }
  if (ours.providerPaymentId !== undefined && ours.providerPaymentId !== theirs.id) {
    return {
      kind: 'orphan',
      reason: 'second_charge',
      detail: `our payment records provider payment ${ours.providerPaymentId}, not this one`,
    };
  }
  if (ours.status === 'needs_review') return { kind: 'in_review' };
  // A wallet part is held apart: the provider was charged for the rest.
  const charged = providerAmountOf(ours);
  if (theirs.amount !== charged || theirs.currency !== ours.amount.currency) {
    return {
      kind: 'disagreement',
      detail: `provider shows ${theirs.amount} ${theirs.currency}, our payment is for ${charged} ${ours.amount.currency}`,
    };
  }
  // Voided, still waiting for the customer, or failed authentication: no money moved.
  if (theirs.status === 'voided' || theirs.status === 'requires_action' || theirs.status === 'failed')
    return { kind: 'agrees' };
  switch (ours.status) {
    case 'authorized':
    case 'succeeded':
    case 'requires_action':
      return { kind: 'agrees' };
    case 'pending':
    case 'unknown': {
      // The reconcile's job until the threshold; after it, the reconcile has had its whole schedule and missed this.
      const since = Date.parse(ours.unknownSince ?? ours.createdAt);
      return since < unknownCutoffMs
        ? { kind: 'disagreement', detail: `provider shows ${theirs.status}, our payment is still ${ours.status}` }
        : { kind: 'reconciling' };
    }
    case 'failed':
    case 'declined':
    case 'voided':
      return { kind: 'disagreement', detail: `provider shows ${theirs.status}, our payment is ${ours.status}` };
  }
}

/** Schedule id (and workflow id prefix of its runs) of the sweep of one workflow task queue. */
export const sweepScheduleId = (taskQueue: string): string => `reconcile-sweep:${taskQueue}`;
