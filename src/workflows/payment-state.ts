/**
 * The payment's state and the pure rules that move it. Kept free of Temporal calls so the rules are unit-tested
 * directly and the charge workflow only orchestrates.
 */
import type { OperationView, PaymentStatus, PaymentView } from '../domain/payment';
import { metadataVerdict } from '../domain/adoption';
import type { RequestRefusal, ProviderEvent, ProviderPayment } from '../domain/definitions';
import { startingView } from '../domain/starting-view';

/** A capture, refund or void, remembered by its own key so a repeat is answered instead of re-run. */
export interface SubOperation {
  readonly kind: 'capture' | 'refund' | 'void';
  readonly key: string;
  readonly fingerprint: string;
  readonly amount: number;
  /**
   * `running` until the provider confirmed (`done`), refused (`rejected`) or an operator must decide; `failed` when its
   * try provably never left (nothing happened, nothing is held: the same key tries again).
   */
  state: 'running' | 'done' | 'rejected' | 'failed' | 'needs_review';
  /** Why it was rejected, failed or sent to review. */
  reason?: string;
  /** Which try under this key this is (absent: the first); a try starts again only after one that never left. */
  tries?: number;
  /** For a `failed` try: the wait the provider or the breaker asked for, answered to its callers as Retry-After. */
  retryAfterMs?: number;
  /** The provider's own error code of a refusal. */
  providerCode?: string;
  /**
   * A refund of a payment with a wallet part: what of it went back to the wallet (first, up to the wallet's captured
   * part); `amount` is the rest, the provider's (0: none of it reached the provider).
   */
  walletAmount?: number;
  /** Its first provider call settled (value, refusal or unknown): the update may answer. */
  firstCallSettled?: boolean;
  /** Its outcome was unknown and a reconcile child is checking the provider. */
  reconciling?: boolean;
  /**
   * The payment's captured (capture) or refunded (refund) total when it started: the provider's total shows it once it
   * reaches `totalBefore + amount`. Absent in operations started before it was recorded.
   */
  totalBefore?: number;
  /**
   * The payment's view when the operation first succeeded: what a repeat of its key answers. `null` until then (set
   * when a capture or refund is recorded); absent on operations carried from a run that did not record answers.
   */
  answer?: PaymentView | null;
}

/** What an operator is asked to decide while the payment is in `needs_review`. */
export interface PendingReview {
  readonly operation: 'create' | 'capture' | 'refund' | 'void';
  readonly key: string;
  readonly amount: number;
  /** The provider total (captured or refunded) that proves the operation happened; for create, any payment does. */
  readonly expectAtLeast: number;
  /** Status to return to when the operator says the capture/refund failed. */
  readonly statusBefore: PaymentStatus;
}

/** What a payment has announced to its merchant so far; carried in its state across continue-as-new. */
export interface AnnouncedEvents {
  /** The status the announcer last saw (announced when it is one of `announcedStatuses`). */
  status: string;
  /** The refunds announced, by key (one `payment.refunded` each). */
  refunds: string[];
}

/** Everything carried across continue-as-new. Plain JSON. */
export interface PaymentState {
  view: PaymentView;
  fingerprint: string;
  /** Provider event ids already applied (webhooks are delivered at least once). */
  seenEvents: string[];
  subOperations: SubOperation[];
  pendingReview?: PendingReview;
  /** The first provider call settled (value, typed failure or unknown): the early answer can go out. */
  firstCallSettled: boolean;
  /** Workflow time (ms) when the authorization lapses; set while authorized. */
  authorizationExpiresAtMs?: number;
  /** Workflow time (ms) when refunds stop being accepted and the workflow closes. */
  refundWindowEndsAtMs?: number;
  /** Workflow time (ms) of the first provider send: the provider's key lifetime counts from it. */
  firstSentAtMs?: number;
  /** While the payment waits for the customer: when the wait ends (workflow time, ms) and how many look-ups it made. */
  customerWait?: { readonly expiresAtMs: number; checks: number };
  /** The provider's own status of the payment, as last reported (a void under review is settled by `voided`). */
  providerStatus?: ProviderPayment['status'];
  /** Capture/refund requests (signals) refused before anything was sent, newest last, for their callers to read. */
  refusals?: RefusedRequest[];
  /** Operators' requests (signals) handled, newest last: a refusal, or none for one applied. */
  resolutions?: HandledResolve[];
  /**
   * The charge's first final answer: the view when the payment first reached a status the API answers 200 for, once its
   * first call settled. A repeat of the payment's key answers it, whatever happened since (captures, refunds, a void).
   * `null` until then; absent in state carried from a run that did not record it (its repeats answer the current view).
   */
  firstAnswer?: PaymentView | null;
  /** What the payment announced to its merchant (merchant-events.ts); absent when it announces nothing. */
  announced?: AnnouncedEvents;
  /** The keys whose first final answer went to the key-record table (key-answers.ts); absent when none go there. */
  keysRecorded?: string[];
}

/** An answer kept for the caller of one request (signal) to read by `requestId`; `atMs`: workflow time it was kept. */
export interface KeptAnswer {
  readonly requestId: string;
  readonly atMs?: number;
}

/** A capture or refund request refused by the payment's rules; its caller reads it by `requestId`. */
export interface RefusedRequest extends KeptAnswer {
  readonly kind: 'capture' | 'refund';
  readonly key: string;
  readonly refusal: RequestRefusal;
}

/** An operator's request (signal) handled: its refusal, or none for a verdict applied. */
export interface HandledResolve extends KeptAnswer {
  readonly refusal?: RequestRefusal;
}

/** How many answers a payment keeps once they are older than {@link ANSWER_MEMORY_MS}. */
export const REFUSALS_LIMIT = 32;
/**
 * How long an answer is kept whatever the count: longer than any caller waits for its own (the client's waits are
 * seconds), so a burst of refusals never drops one its caller has not read yet.
 */
export const ANSWER_MEMORY_MS = 10 * 60_000;
/** The bound of the memory even within {@link ANSWER_MEMORY_MS} (a flood of refused requests), for the state's size. */
export const ANSWERS_HARD_LIMIT = 512;

/** How many webhook event ids the dedup set keeps: enough for every redelivery window, bounded across continue-as-new. */
export const SEEN_EVENTS_LIMIT = 256;

const TERMINAL: ReadonlySet<PaymentStatus> = new Set<PaymentStatus>(['declined', 'failed', 'voided']);

/** The statuses the API answers 200 for: `settledStatuses` of domain/payment.ts, whose module carries zod. */
const ANSWERED: ReadonlySet<PaymentStatus> = new Set<PaymentStatus>([
  'authorized',
  'succeeded',
  'declined',
  'failed',
  'voided',
]);

/** A copy of the view as it is now, to answer repeats with later (plain JSON, as state is). */
const snapshotOf = (view: PaymentView): PaymentView => JSON.parse(JSON.stringify(view)) as PaymentView;

/**
 * Records the charge's answer that repeats of its key replay, once it is final: the first call settled and the payment
 * reached a status answered 200 (at once, or later from unknown or a review). Recorded once.
 */
export function recordFirstAnswer(state: PaymentState): void {
  if (firstAnswerDue(state)) state.firstAnswer = snapshotOf(state.view);
}

/**
 * The first answer is final but not recorded yet: the first call settled at an answered status and the task that
 * decided it is still finishing its first steps (a split payment's wallet part, captured or released by a local
 * activity after the card's answer). What the view shows meanwhile is not what repeats will replay.
 */
export function firstAnswerDue(state: PaymentState): boolean {
  return state.firstAnswer === null && state.firstCallSettled && ANSWERED.has(state.view.status);
}

/**
 * Records, for each capture or refund that just succeeded, the view that repeats of its key replay. Called once the
 * view's `operations` are in step (it shows the operation succeeded); each is recorded once.
 */
export function recordOperationAnswers(state: PaymentState): void {
  for (const op of state.subOperations) {
    if (op.answer === null && op.state === 'done') op.answer = snapshotOf(state.view);
  }
}

/** True when no more money can move through this payment (refund windows aside). */
export function isClosedStatus(status: PaymentStatus): boolean {
  return TERMINAL.has(status);
}

/**
 * Applies what the provider says about the payment, from a call result, a lookup or a webhook. Only forward moves:
 * amounts only grow, `succeeded` is never taken back to `authorized`, `voided` only follows `authorized`.
 * Returns true when something changed.
 */
export function applyProviderPayment(state: PaymentState, p: ProviderPayment, nowIso: string): boolean {
  const v = state.view;
  const before = JSON.stringify(v);
  if (!v.providerPaymentId) v.providerPaymentId = p.id;
  // Forward only, like ours: an older answer (authorized) never takes back succeeded or voided.
  const open = [undefined, 'authorized', 'requires_action'];
  if (p.id === v.providerPaymentId && open.includes(state.providerStatus)) state.providerStatus = p.status;
  if (movedMoney(p, v.status)) {
    v.amountAuthorized = Math.max(v.amountAuthorized, p.amount);
    v.amountCaptured = Math.max(v.amountCaptured, p.amountCaptured);
    v.amountRefunded = Math.max(v.amountRefunded, p.amountRefunded);
  }
  // needs_review is left only through reviewSatisfied() or an operator, never by a side door.
  const next = forwardStatus(v.status, p.status);
  if (next !== v.status) {
    setStatus(state, next, nowIso);
    customerOutcome(state, p, next);
  }
  const changed = JSON.stringify(v) !== before;
  if (changed) v.updatedAt = nowIso;
  return changed;
}

/**
 * Whether a provider payment's amounts are money the provider holds: not while it waits for the customer, nor once
 * their authentication failed, nor a cancel of one that never got past waiting (ours still waits, or was declined).
 */
function movedMoney(p: ProviderPayment, ours: PaymentStatus): boolean {
  if (p.status === 'requires_action' || p.status === 'failed') return false;
  return p.status !== 'voided' || (ours !== 'requires_action' && ours !== 'declined');
}

/** What a payment the customer had to act on keeps of it: where to send them, or why it ended declined. */
function customerOutcome(state: PaymentState, p: ProviderPayment, next: PaymentStatus): void {
  const v = state.view;
  if (next === 'requires_action' && p.nextAction) v.nextAction = { ...p.nextAction };
  if (next !== 'declined') return;
  // Failed by the customer, or cancelled while it waited for them (the wait's own cancel when it expired).
  v.declineCode = p.status === 'failed' ? (p.declineCode ?? 'authentication_failed') : 'action_expired';
}

/** The status a provider payment status moves ours to, only ever forward. */
export function forwardStatus(ours: PaymentStatus, theirs: ProviderPayment['status']): PaymentStatus {
  const movable = ours === 'pending' || ours === 'unknown' || ours === 'authorized' || ours === 'requires_action';
  if (!movable) return ours;
  if (theirs === 'requires_action') return ours === 'authorized' ? ours : 'requires_action';
  // Only a payment that never reached authorized can fail the customer's authentication or be cancelled unauthorized.
  if (theirs === 'failed') return ours === 'authorized' ? ours : 'declined';
  if (theirs === 'succeeded') return 'succeeded';
  if (theirs === 'voided') return ours === 'requires_action' ? 'declined' : 'voided';
  return ours === 'authorized' ? ours : 'authorized';
}

/**
 * What an operator is asked about an operation the payment could not confirm: what the provider's total must reach
 * to show it happened (its total before it started plus its amount: a webhook that already applied it does not
 * count it twice).
 */
export function reviewOf(op: SubOperation, view: PaymentView): PendingReview {
  const total = op.kind === 'capture' ? view.amountCaptured : view.amountRefunded;
  // Operations from before `totalBefore` was recorded (and their histories) keep the old rule: the view's total now.
  const before = op.totalBefore ?? total;
  return {
    operation: op.kind,
    key: op.key,
    amount: op.amount,
    expectAtLeast: op.kind === 'void' ? 0 : before + op.amount,
    statusBefore: view.status,
  };
}

/**
 * Whether the provider's totals, as the view shows them, already show this capture or refund (a webhook may tell it
 * before the operation's own reconcile does), or a void. Operations from before `totalBefore` was recorded: never
 * (their reconcile decides, as it did).
 */
export function operationShown(state: PaymentState, op: SubOperation): boolean {
  if (op.kind === 'void') return state.providerStatus === 'voided';
  if (op.totalBefore === undefined) return false;
  const total = op.kind === 'capture' ? state.view.amountCaptured : state.view.amountRefunded;
  return total >= op.totalBefore + op.amount;
}

/** Ends the review: the operation under it becomes `done` (the provider shows it) or `rejected` (it did not happen). */
export function closeReview(state: PaymentState, outcome: 'done' | 'rejected'): void {
  for (const op of state.subOperations) if (op.state === 'needs_review') op.state = outcome;
  state.pendingReview = undefined;
}

/** Whether what the provider shows now settles the operation an operator was asked about. */
export function reviewSatisfied(state: PaymentState): PaymentStatus | undefined {
  const r = state.pendingReview;
  const v = state.view;
  if (!r) return undefined;
  if (r.operation === 'create' && v.providerPaymentId) return v.amountCaptured > 0 ? 'succeeded' : 'authorized';
  if (r.operation === 'capture' && v.amountCaptured >= r.expectAtLeast) return 'succeeded';
  if (r.operation === 'refund' && v.amountRefunded >= r.expectAtLeast) return 'succeeded';
  if (r.operation === 'void' && state.providerStatus === 'voided') return 'voided';
  return undefined;
}

/**
 * Applies a provider webhook once: duplicates (same event id) change nothing, and neither does an event about a payment
 * that is not this one's (see {@link eventMayBeOurs}).
 */
export function applyProviderEvent(state: PaymentState, event: ProviderEvent, nowIso: string): boolean {
  if (state.seenEvents.includes(event.eventId)) return false;
  rememberEvent(state, event.eventId);
  if (!eventMayBeOurs(state.view, event.payment)) return false;
  return applyProviderPayment(state, event.payment, nowIso);
}

/**
 * Whether a provider payment may be this payment's. All merchants share one provider account: metadata naming another
 * merchant or key is never ours; without metadata, it is the provider payment we know, or, while we know none, one
 * whose amount, currency and reference are ours.
 */
export function eventMayBeOurs(view: PaymentView, p: ProviderPayment): boolean {
  const verdict = metadataVerdict(p.metadata, { merchantId: view.merchantId, key: view.key });
  if (verdict === 'foreign') return false;
  if (view.providerPaymentId !== undefined) return view.providerPaymentId === p.id;
  return (
    verdict === 'ours' ||
    // A wallet part is held apart: the provider's payment is the rest.
    (p.amount === view.amount.value - (view.wallet?.amount ?? 0) &&
      p.currency === view.amount.currency &&
      p.reference === view.orderId)
  );
}

/** Appends `item`, dropping the oldest entries beyond `limit` (a bounded memory in workflow state). */
export function pushBounded<T>(list: T[], item: T, limit: number): void {
  list.push(item);
  if (list.length > limit) list.splice(0, list.length - limit);
}

/**
 * Keeps one request's answer for its caller: beyond {@link REFUSALS_LIMIT} the oldest are dropped only once older than
 * {@link ANSWER_MEMORY_MS} (or beyond {@link ANSWERS_HARD_LIMIT}). Dropping by count alone lost the answers of a burst
 * before their callers read them, and those callers answered 202 for requests that were refused.
 */
export function keepAnswer<T extends KeptAnswer>(list: T[], item: T, nowMs: number): void {
  pushBounded(list, item, ANSWERS_HARD_LIMIT);
  // Answers kept before they carried a time count as old.
  const old = (a: T | undefined) => a?.atMs === undefined || nowMs - a.atMs >= ANSWER_MEMORY_MS;
  let drop = 0;
  while (list.length - drop > REFUSALS_LIMIT && old(list[drop])) drop += 1;
  if (drop > 0) list.splice(0, drop);
}

/** Adds an event id to the dedup set, dropping the oldest beyond {@link SEEN_EVENTS_LIMIT}. */
export function rememberEvent(state: PaymentState, eventId: string): void {
  pushBounded(state.seenEvents, eventId, SEEN_EVENTS_LIMIT);
}

/** Sets the status (and the `unknownSince`/`review` that go with it). */
export function setStatus(state: PaymentState, status: PaymentStatus, nowIso: string, reviewReason?: string): void {
  const v = state.view;
  v.status = status;
  if (status === 'unknown' && !v.unknownSince) v.unknownSince = nowIso;
  if (status === 'needs_review') v.review = { reason: reviewReason ?? 'outcome unknown' };
  else delete v.review;
  if (status !== 'unknown' && status !== 'needs_review') delete v.unknownSince;
  if (status !== 'requires_action') delete v.nextAction;
  // A capture is final (the provider releases the rest, as Stripe does) and a void releases all that was authorized.
  const released = v.amountAuthorized - v.amountCaptured;
  if ((status === 'succeeded' || status === 'voided') && released > 0) v.amountReleased = released;
  else delete v.amountReleased;
  v.updatedAt = nowIso;
}

/** Captured minus refunded minus what refunds still running may yet add: what a new refund may take at most. */
export function refundable(state: PaymentState): number {
  const refunded = state.view.amountRefunded;
  const running = state.subOperations
    .filter((o) => o.kind === 'refund' && o.state === 'running')
    .reduce((sum, o) => sum + notYetShown(o, refunded), 0);
  return state.view.amountCaptured - refunded - running + walletRefundable(state.view);
}

/** What refunds may still return to a payment's wallet: its captured part less what went back (0 without one). */
export function walletRefundable(view: PaymentView): number {
  const w = view.wallet;
  return w?.status === 'captured' ? w.amount - w.refunded : 0;
}

/**
 * The part of a running refund the refunded total does not show yet: all of it, unless the provider's total (from its
 * webhook) already covers it; then counting it again would refuse a valid refund.
 */
function notYetShown(op: SubOperation, refunded: number): number {
  if (op.totalBefore === undefined) return op.amount;
  return Math.min(op.amount, Math.max(0, op.totalBefore + op.amount - refunded));
}

/** The operations as the payment view shows them (`done` reads `succeeded`: the provider confirmed it). */
export function operationViews(state: PaymentState): OperationView[] {
  return state.subOperations.map((o) => ({
    kind: o.kind,
    key: o.key,
    // What the merchant asked for: the provider's part and the wallet's (a refund of a payment with a wallet part).
    amount: o.amount + (o.walletAmount ?? 0),
    state: o.state === 'done' ? 'succeeded' : o.state,
    ...(o.reason === undefined ? {} : { reason: o.reason }),
    ...(o.providerCode === undefined ? {} : { providerCode: o.providerCode }),
  }));
}

/** A capture or refund whose outcome is still open (first call in flight or a reconcile running). */
export const hasRunningOperation = (state: PaymentState): boolean =>
  state.subOperations.some((o) => o.state === 'running');

/** Finds an earlier capture/refund with this key. */
export function findSubOperation(state: PaymentState, kind: SubOperation['kind'], key: string) {
  return state.subOperations.find((o) => o.kind === kind && o.key === key);
}

/** A new payment's state: pending, nothing authorized, at the provider its request names. */
export function initialState(
  input: {
    readonly merchantId: string;
    readonly key: string;
    readonly fingerprint: string;
    readonly request: { readonly orderId: string; readonly amount: PaymentView['amount']; readonly provider: string };
  },
  nowIso: string,
): PaymentState {
  return {
    view: startingView(input, 'pending', nowIso),
    fingerprint: input.fingerprint,
    seenEvents: [],
    subOperations: [],
    firstCallSettled: false,
    firstAnswer: null,
  };
}
