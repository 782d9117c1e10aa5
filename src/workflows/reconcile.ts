import {
  ApplicationFailure,
  condition,
  log,
  patched,
  proxySinks,
  setHandler,
  workflowInfo,
} from '@temporalio/workflow';
import { reconcileResolvedSignal } from '../domain/definitions';
import { ErrorType } from '../domain/errors';
import { type KeyScope, keyScope } from '../domain/ids';
import type {
  Expectation,
  ReconcileInput,
  ReconcileResult,
  ResubmitCreate,
  ResubmitMovement,
  Resubmission,
} from '../domain/operations';
import type { PaymentSinks } from '../domain/sinks';
import { reconcileWaitSummary } from '../domain/summaries';
import type { ProviderPayment } from '../domain/provider-payment';
import { paymentMetadata, providerActivities } from './activity-options';
import {
  attemptFailure,
  failureType,
  lastFailureType,
  messageOf,
  neverStarted,
  notSentReason,
  sendsOf,
} from './failures';
import { type ReconcileTally, reconcileReviewReason } from './reconcile-reason';
import { PATCHES } from './patches';
import { nowIso } from './payment-port';

type ProviderActivities = ReturnType<typeof providerActivities>;

/** Whether a provider payment shows that the write under reconciliation happened. */
export function meetsExpectation(p: ProviderPayment, expect: Expectation): boolean {
  switch (expect.kind) {
    case 'created':
      return p.amount === expect.amount && p.currency === expect.currency;
    case 'captured':
      return p.amountCaptured >= expect.amountCapturedAtLeast;
    case 'refunded':
      return p.amountRefunded >= expect.amountRefundedAtLeast;
    case 'voided':
      return p.status === 'voided';
  }
}

/**
 * Patch: a look-up that failed (the provider unreachable for the look-up's whole budget) is a check that learned
 * nothing: the reconcile goes on checking, past its schedule until the provider's key lifetime while the look-ups keep
 * failing. Histories before it ended the reconcile with the look-up's failure.
 */
const CHECK_THROUGH_OUTAGES = PATCHES.reconcileChecksThroughOutages.id;

/**
 * Patch: a capture's or refund's reconcile resends the same write with the same key after the settle window, as a
 * create's does. Histories before it ended such a reconcile in review when its look-ups found nothing.
 */
const MOVEMENT_RESUBMITS = PATCHES.movementResubmits.id;

/**
 * Patch: a resubmission refused here before it left (nothing sent) does not use up the reconcile's one resubmission;
 * the next check past the settle window tries again. Histories before it went on checking without resending and ended
 * in review ("refused here before sending").
 */
const RESUBMITS_UNTIL_SENT = PATCHES.resubmitsUntilSent.id;

/**
 * Patch: a resubmission that was still refused here before it left (an open breaker, a provider's cool-down) when the
 * schedule ends does not send the write to review: nothing is known to be at the provider and nothing left, so the
 * reconcile goes on checking and resubmitting on doubling waits while the provider's key outlives one more write's
 * budget. Histories before it ended in review ("refused here before sending"), which the soak's outages turned into
 * operator work: a create whose every resubmission met a Retry-After of minutes.
 */
const RESUBMITS_THROUGH_OUTAGES = PATCHES.resubmitsThroughOutages.id;

/**
 * Patch: a resubmission that timed out before any worker started it sent nothing (refused here, `never_started`), so
 * the next check resubmits. Histories before it counted it as one request that may have left: no more resubmissions,
 * and review at the schedule's end.
 */
const UNSTARTED_RESUBMISSION = PATCHES.unstartedResubmission.id;

/**
 * Patch: a resubmission the provider answered without processing it (its one request answered 429, 503 or 409:
 * `ProviderUnavailable`) left nothing that could land, so the next check resubmits, as after one refused here. Histories
 * before it counted it as a request that may have left: no more resubmissions, and review at the schedule's end (the
 * production-schedule soak's create left `unknown` for the 1 h check after a 429 with a Retry-After of 2 min).
 */
const RESUBMITS_AFTER_UNPROCESSED = PATCHES.resubmitsAfterUnprocessed.id;

/**
 * Patch: a resubmission whose outcome stayed unknown (its request may have left) no longer ends the resubmissions:
 * each later check that finds nothing resubmits under the same key, while the key outlives one more write (the
 * provider answers a request it processed with that answer again). Histories before it made one such resubmission,
 * then only looked, and ended in review at the schedule's end ("its outcome unknown") when the outcome stayed unknown.
 */
const RESUBMITS_WHILE_UNKNOWN = PATCHES.resubmitsWhileUnknown.id;

/**
 * Whether a resubmission left nothing that can land at the provider: refused here before it left, or (patched) its one
 * request answered without being processed. The next check resubmits after one (and, since
 * {@link RESUBMITS_WHILE_UNKNOWN}, after one that may have left too); only these go on past the schedule's end.
 */
const leftNothing = (r: NonNullable<ReconcileTally['resubmission']>): boolean =>
  r.sends === 0 || r.unprocessed === true;

/** Patch: past the schedule, the waits stop doubling at the schedule's longest wait ({@link nextWait}). */
const WAIT_CAP = PATCHES.reconcileWaitCap.id;

/** How long before the last moment a resubmission fits in the key's lifetime the last check is made. */
const RESUBMIT_MARGIN_MS = 60_000;

/**
 * Durable wait-and-check for one write whose outcome is unknown: wait (a webhook ends the wait early), look the write
 * up, and repeat on the schedule. After the settle window a provider that honours keys gets the same request again
 * with the same key while the key is alive. A look-up that fails is a check that learned nothing: an outage of any
 * length is waited out, up to the provider's key lifetime. Ends `found`, with the provider's own answer, or
 * `needs_review` with a reason that says what was checked, sent and refused; it never guesses `failed`.
 */
export async function reconcileWorkflow(input: ReconcileInput): Promise<ReconcileResult> {
  // Metrics through a sink: no command, not called on replay.
  const { paymentMetrics } = proxySinks<PaymentSinks>();
  const labels = { operation: input.operation, provider: input.provider };
  paymentMetrics.reconcile({ event: 'started', ...labels });
  const result = await waitAndCheck(input);
  paymentMetrics.reconcile({ event: result.outcome, ...labels });
  // When it decided: the payment stamps its view with this, not with the clock of the task that hears it.
  return { ...result, at: nowIso() };
}

async function waitAndCheck(input: ReconcileInput): Promise<ReconcileResult> {
  // A holder, not a `let`: TypeScript would keep a captured `let` narrowed to undefined across the await.
  const webhook: { payment?: ProviderPayment } = {};
  setHandler(reconcileResolvedSignal, (payment) => {
    if (meetsExpectation(payment, input.expect)) webhook.payment = payment;
  });
  const acts = providerActivities(workflowInfo().taskQueue, input.provider, input.capabilities, input.retry);
  const keyTtlMs = input.capabilities.keyTtlSeconds === null ? 0 : input.capabilities.keyTtlSeconds * 1000;
  const startedAtMs = Date.now();
  // How long to keep checking while the look-ups fail: the schedule, or the provider's key lifetime if that is later.
  const scheduleEndsAtMs = startedAtMs + input.scheduleMs.reduce((a, b) => a + b, 0);
  const horizonAtMs = Math.max(scheduleEndsAtMs, input.firstSentAtMs + keyTtlMs);
  const tally: ReconcileTally = { checks: 0, notFound: 0, failedLookups: 0, untilKeyLifetime: false };
  const done = (result: ReconcileResult): ReconcileResult =>
    tally.resubmission && tally.resubmission.sends > 0
      ? { ...result, resubmissionSends: tally.resubmission.sends }
      : result;

  let waitMs: number | undefined = input.scheduleMs[0];
  for (let next = 1; waitMs !== undefined; next += 1) {
    await condition(() => webhook.payment !== undefined, waitMs, {
      summary: reconcileWaitSummary(input.operation, input.provider, waitMs),
    });
    const { checks } = tally;
    if (webhook.payment) return done({ outcome: 'found', payment: webhook.payment, via: 'webhook', checks });
    tally.checks += 1;
    let found: ProviderPayment | null;
    try {
      found = await lookUp(acts, input);
    } catch (err) {
      if (!patched(CHECK_THROUGH_OUTAGES)) throw err;
      // The provider could not be asked: nothing learned, not "not found". Wait and check again.
      tally.failedLookups += 1;
      tally.lastLookupFailure = lastFailureType(err);
      log.warn('reconcile look-up failed; checking again later', { reason: messageOf(err) });
      waitMs = nextWait(input.scheduleMs, next, waitMs, horizonAtMs);
      tally.untilKeyLifetime = waitMs === undefined && horizonAtMs > scheduleEndsAtMs;
      continue;
    }
    if (found && meetsExpectation(found, input.expect))
      return done({ outcome: 'found', payment: found, via: 'lookup', checks: tally.checks });
    tally.notFound += 1;

    const sinceFirstSend = Date.now() - input.firstSentAtMs;
    const resubmission: Resubmission | undefined = input.resubmit ?? input.resubmitMovement;
    // A resubmission at each check that finds nothing, under the same key: one refused here before it left (an open
    // breaker, a cool-down) sent nothing, and one whose outcome stayed unknown is answered again if it was processed
    // (patched; before, one that may have left was the last).
    const earlier = tally.resubmission;
    if (
      resubmission &&
      (earlier === undefined || leftNothing(earlier) || patched(RESUBMITS_WHILE_UNKNOWN)) &&
      input.capabilities.idempotencyKeys &&
      sinceFirstSend >= input.settleWindowMs &&
      sinceFirstSend + acts.writeBudgetMs(resubmission.kind) < keyTtlMs &&
      (resubmission.kind === 'create' || patched(MOVEMENT_RESUBMITS)) &&
      (earlier === undefined || patched(RESUBMITS_UNTIL_SENT))
    ) {
      // Safe only because the provider stores the key: if the first request did commit, this replays its answer.
      const answer = await resubmit(acts, input, resubmission);
      const unprocessed = answer.unprocessed === true && patched(RESUBMITS_AFTER_UNPROCESSED);
      tally.resubmission = {
        sends: answer.sends,
        ...(unprocessed ? { unprocessed } : {}),
        ...(answer.refusedWhy === undefined ? {} : { refusedWhy: answer.refusedWhy }),
      };
      if (answer.result) return done({ ...answer.result, checks: tally.checks });
      if (leftNothing(tally.resubmission)) tally.refusedResubmissions = (tally.refusedResubmissions ?? 0) + 1;
      else tally.unknownResubmissions = (tally.unknownResubmissions ?? 0) + 1;
      // Unknown again: keep checking on the schedule.
    }
    // A check that answered ends the reconcile at the schedule's end: past it, only failed look-ups go on, and a
    // resubmission refused here before it left, while the key lives long enough for one more.
    const lastWaitMs = waitMs;
    waitMs = input.scheduleMs[next];
    const nothingLeft = tally.resubmission !== undefined && leftNothing(tally.resubmission);
    if (waitMs === undefined && resubmission && nothingLeft && patched(RESUBMITS_THROUGH_OUTAGES)) {
      const lastResubmitAtMs =
        input.firstSentAtMs + keyTtlMs - acts.writeBudgetMs(resubmission.kind) - RESUBMIT_MARGIN_MS;
      waitMs = nextWait(input.scheduleMs, next, lastWaitMs, lastResubmitAtMs);
      tally.refusedUntilKeyLifetime = waitMs === undefined && next > input.scheduleMs.length;
    }
  }
  return done({
    outcome: 'needs_review',
    reason: reconcileReviewReason(input.operation, input.provider, tally, Date.now() - startedAtMs),
    checks: tally.checks,
  });
}

/**
 * The wait before check `next + 1` after a failed look-up: the schedule's, then (past it) twice the last one, at most
 * the schedule's longest wait (patched: before, no bound but the horizon, so a provider back after days of outage
 * could wait days more for the next check), the last cut to end at `horizonAtMs`; undefined once the horizon is reached.
 */
function nextWait(
  scheduleMs: readonly number[],
  next: number,
  lastMs: number,
  horizonAtMs: number,
): number | undefined {
  if (next < scheduleMs.length) return scheduleMs[next];
  const left = horizonAtMs - Date.now();
  if (left <= 0) return undefined;
  const doubled = 2 * lastMs;
  return Math.min(patched(WAIT_CAP) ? Math.min(doubled, Math.max(...scheduleMs)) : doubled, left);
}

/** The scope the write's provider key is derived from (its operation aside). */
const keyScopeOf = (input: ReconcileInput): KeyScope => keyScope(input.merchantId, input.key, input.keyProvider);

/** One look-up of the write under reconciliation. */
function lookUp(acts: ProviderActivities, input: ReconcileInput): Promise<ProviderPayment | null> {
  return acts.lookup.lookupPayment({
    provider: input.provider,
    ...keyScopeOf(input),
    operation: input.operation,
    reference: input.reference,
    paymentId: input.paymentId,
    // By reference (no keys), only a payment that could be this charge counts: same amount, created after our send.
    ...(input.expect.kind === 'created'
      ? { match: { amount: input.expect.amount, currency: input.expect.currency, createdGteMs: input.firstSentAtMs } }
      : {}),
  });
}

/** What a resubmission did: a result that ends the reconcile, if any, the requests that may have left, and why none. */
interface ResubmitAnswer {
  readonly result?:
    | { readonly outcome: 'found'; readonly payment: ProviderPayment; readonly via: 'resubmit' }
    | { readonly outcome: 'declined'; readonly declineCode: string }
    | { readonly outcome: 'rejected'; readonly reason: string };
  readonly sends: number;
  readonly refusedWhy?: string;
  /** Its one request was answered without being processed (`ProviderUnavailable`): nothing of it can land. */
  readonly unprocessed?: boolean;
}

/** The same write again, with the same key: the provider's stored answer if the first request did commit. */
async function resubmit(acts: ProviderActivities, input: ReconcileInput, r: Resubmission): Promise<ResubmitAnswer> {
  try {
    return r.kind === 'create' ? await resubmitCreate(acts, input, r) : await resubmitMovement(acts, input, r);
  } catch (err) {
    if (neverStarted(err) && patched(UNSTARTED_RESUBMISSION)) return { sends: 0, refusedWhy: 'never_started' };
    const sends = sendsOf(err);
    const refusedWhy = sends === 0 ? { refusedWhy: notSentReason(err) } : {};
    if (failureType(err) === ErrorType.ProviderRejected)
      return { result: { outcome: 'rejected', reason: messageOf(err) }, sends, ...refusedWhy };
    // One request, and its answer says the provider did not process it (an earlier request cut off by a dead worker
    // would count as a second send, its outcome unknown).
    const last = attemptFailure(err);
    if (sends === 1 && last instanceof ApplicationFailure && last.type === ErrorType.ProviderUnavailable)
      return { sends, unprocessed: true, refusedWhy: 'provider_unavailable' };
    return { sends, ...refusedWhy };
  }
}

/** The create, as the charge sent it: a decline is the provider's answer too. */
async function resubmitCreate(
  acts: ProviderActivities,
  input: ReconcileInput,
  r: ResubmitCreate,
): Promise<ResubmitAnswer> {
  const result = await acts.write.createPayment({
    provider: input.provider,
    ...keyScopeOf(input),
    input: {
      amount: r.amount,
      currency: r.currency,
      reference: input.reference,
      paymentMethod: r.paymentMethod,
      capture: r.capture,
      metadata: paymentMetadata(input.merchantId, input.key),
    },
    notBeforeMs: input.firstSentAtMs,
    afterUnknown: true,
  });
  const sends = result.sends ?? 1;
  if (result.outcome === 'declined') return { result: { outcome: 'declined', declineCode: result.declineCode }, sends };
  return { result: { outcome: 'found', payment: result.payment, via: 'resubmit' }, sends };
}

/** The capture or refund, as the payment sent it: its amount on the provider's total before it. */
async function resubmitMovement(
  acts: ProviderActivities,
  input: ReconcileInput,
  r: ResubmitMovement,
): Promise<ResubmitAnswer> {
  const common = {
    provider: input.provider,
    merchantId: input.merchantId,
    key: input.key,
    // A capture's or refund's reconcile always names the payment it moves money on.
    paymentId: input.paymentId as string,
    amount: r.amount,
    afterUnknown: true,
  };
  const payment =
    r.kind === 'capture'
      ? await acts.write.capturePayment({ ...common, amountCapturedBefore: r.totalBefore })
      : (await acts.write.refundPayment({ ...common, amountRefundedBefore: r.totalBefore })).payment;
  return { result: { outcome: 'found', payment, via: 'resubmit' }, sends: 1 };
}
