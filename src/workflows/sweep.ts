import { SearchAttributeType, defineSearchAttributeKey } from '@temporalio/common';
import { type ActivityOptions, log, proxyActivities, workflowInfo } from '@temporalio/workflow';
import type { SweepActivities } from '../activities/sweep';
import type { SweepInput, SweepResult } from '../domain/sweep';
import { maxListedReviewItems, providerSeconds, sweepDefaults, sweepWindow } from '../domain/sweep-window';
import { describeProvider, providerActivities } from './activity-options';

/** Set by the server on every workflow a schedule starts: the time the action was scheduled for. */
const TemporalScheduledStartTime = defineSearchAttributeKey('TemporalScheduledStartTime', SearchAttributeType.DATETIME);

/** Temporal-side reads and signals: a page per call, so each call stays short and a retry repeats one page. */
const sweepCall = {
  startToCloseTimeout: '2m',
  heartbeatTimeout: '30s',
  retry: { initialInterval: '1s', maximumInterval: '30s', maximumAttempts: 5 },
} satisfies ActivityOptions;
const { ensureReconcilesForStuckPayments, checkProviderPayments } = proxyActivities<SweepActivities>(sweepCall);

/**
 * The reconcile sweep, run by a schedule (`reconcile-sweep:<taskQueue>`): (a) every payment of this task queue stuck
 * in `unknown` beyond the threshold gets a live reconcile; (b) the provider's payments created in this run's window
 * are compared with ours, and every orphan and disagreement becomes a review item (`review:<provider>:<id>`).
 *
 * The window: a schedule passes the same input to every run, so the run derives it from its scheduled time rather than
 * carrying "the last run's end": `[t - lookback - window, t - lookback)`. The scheduled time (not the start time) keeps
 * consecutive windows on the schedule's grid even when a start is delayed; the window (2 intervals by default) overlaps
 * the previous one, so a run skipped by the SKIP overlap policy, or failed, leaves no gap; the lookback (at least the
 * settle window) keeps payments still in flight out of the comparison.
 */
export async function reconcileSweepWorkflow(input: SweepInput): Promise<SweepResult> {
  const info = workflowInfo();
  const anchorMs = info.typedSearchAttributes.get(TemporalScheduledStartTime)?.getTime() ?? info.startTime.getTime();
  const pageSize = input.pageSize ?? sweepDefaults.pageSize;
  const unknownCutoffMs = anchorMs - input.unknownThresholdMs;
  const window = sweepWindow(input, anchorMs);
  const result: SweepResult = {
    stuckUnknown: 0,
    reconcilesEnsured: 0,
    providerPaymentsChecked: 0,
    orphans: 0,
    disagreements: 0,
    reviewItemsStarted: 0,
    reviewItems: [],
    window,
    truncated: false,
  };

  // (a) Stuck in unknown: the charge workflow starts a reconcile on the signal unless one is running.
  let pageToken: string | undefined;
  let stuckDone = false;
  for (let page = 0; page < (input.maxStuckPages ?? sweepDefaults.maxStuckPages) && !stuckDone; page += 1) {
    const r = await ensureReconcilesForStuckPayments({
      taskQueue: info.taskQueue,
      unknownCutoffMs,
      pageSize,
      ...(pageToken === undefined ? {} : { pageToken }),
    });
    result.stuckUnknown += r.stuck;
    result.reconcilesEnsured += r.signalled;
    pageToken = r.nextPageToken;
    stuckDone = pageToken === undefined;
  }
  if (!stuckDone) result.truncated = true;

  // (b) The provider's payments of the window against ours.
  const { createdGte, createdLt } = providerSeconds(window);
  for (const provider of input.providers) {
    const capabilities = await describeProvider(provider);
    const { lookup } = providerActivities(info.taskQueue, provider, capabilities, input.retry);
    let startingAfter: string | undefined;
    let listDone = false;
    for (let page = 0; page < (input.maxProviderPages ?? sweepDefaults.maxProviderPages) && !listDone; page += 1) {
      const list = await lookup.listProviderPayments({
        provider,
        createdGte,
        createdLt,
        limit: pageSize,
        ...(startingAfter === undefined ? {} : { startingAfter }),
      });
      if (list.data.length > 0) {
        const checked = await checkProviderPayments({
          provider,
          taskQueue: info.taskQueue,
          payments: list.data,
          unknownCutoffMs,
          flaggedBy: info.workflowId,
        });
        result.providerPaymentsChecked += checked.checked;
        result.orphans += checked.orphans;
        result.disagreements += checked.disagreements;
        result.reviewItemsStarted += checked.reviewItemsStarted;
        result.reviewItems.push(...checked.reviewItems.slice(0, maxListedReviewItems - result.reviewItems.length));
      }
      startingAfter = list.data.at(-1)?.id;
      listDone = !list.hasMore || startingAfter === undefined;
    }
    if (!listDone) result.truncated = true;
  }

  log.info('reconcile sweep finished', {
    stuckUnknown: result.stuckUnknown,
    reconcilesEnsured: result.reconcilesEnsured,
    providerPaymentsChecked: result.providerPaymentsChecked,
    orphans: result.orphans,
    disagreements: result.disagreements,
    reviewItemsStarted: result.reviewItemsStarted,
    truncated: result.truncated,
  });
  return result;
}
