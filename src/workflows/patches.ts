/**
 * Every `patched()` id of the workflows, in one place: what the new branch does, what runs started before it do, and
 * the commit that added it. A workflow module imports its id from here, so this list is the inventory of code kept
 * only for older histories (docs/versioning.md: why patching and not worker versioning, and when an entry may go:
 * `deprecatePatch` once no open run predates it, then the old branch and the entry are removed a release later).
 * test/workflows/patches.test.ts holds src/workflows to this list and counts the recorded histories of each branch.
 */

/** One patch: its id (the marker in histories) and what it changed. */
export interface PatchEntry {
  /** The `patched()` id, recorded as a marker in the histories of runs that took the new branch. */
  readonly id: string;
  /** The commit that added it. */
  readonly since: string;
  /** The new branch. */
  readonly change: string;
  /** What a run whose history predates it does (the old branch, kept so it replays). */
  readonly before: string;
  /**
   * Why no recorded history carries its marker, when none does: the new branch is not reachable by the current code, or
   * only on a path the tests reach without recording. Absent: at least one history in test/histories/ carries it.
   */
  readonly unrecorded?: string;
}

export const PATCHES = {
  publishOnChange: {
    id: 'publish-status-on-change',
    since: '87b3a37',
    change: 'the PaymentStatus search attribute is upserted only when the status changed',
    before: 'upserted at more transitions',
  },
  verifyOperatorPayment: {
    id: 'verify-operator-payment-id',
    since: '87b3a37',
    change: "an operator's providerPaymentId is looked up at the provider before it is accepted",
    before: "the operator's id taken as told",
    unrecorded:
      'reached only inside the verdict-as-told path, which runs only for histories before resolve-from-provider: ' +
      'no new run takes it',
  },
  operationTotalBefore: {
    id: 'operation-total-before',
    since: '33e905a',
    change: "a capture or refund records the payment's total before it (a resubmission needs it)",
    before: 'no total recorded',
  },
  resolveFromProvider: {
    id: 'resolve-from-provider',
    since: '33e905a',
    change: 'every verdict is checked by a look-up at the provider, whose amounts and status the payment takes',
    before: 'the verdict as the operator told it (amounts at least what was expected)',
  },
  eventsFromHolder: {
    id: 'provider-events-from-holder',
    since: 'c3f84b6',
    change: 'a provider event is applied only from the provider holding the payment (failover moves it)',
    before: 'events from any provider applied',
  },
  publishUnknownSince: {
    id: 'publish-unknown-since',
    since: 'eab1012',
    change: 'a run that continued as new while unknown publishes when the payment became unknown (UnknownSince)',
    before: 'no UnknownSince: the sweep finds such a run by its StartTime',
  },
  reconcileChecksThroughOutages: {
    id: 'reconcile-checks-through-outages',
    since: '6315d1e',
    change: 'a look-up that failed for its whole budget is a check that learnt nothing: the reconcile goes on',
    before: "the reconcile ended with the look-up's failure",
  },
  refusalAfterSendUnknown: {
    id: 'refusal-after-send-unknown',
    since: '3da55b6',
    change: "a worker's refusal to send (ValidationError) after a request may have left is unknown, never failed",
    before: 'failed',
    unrecorded:
      'a worker configured otherwise now refuses retryably once a request may have left (it waits for a matching ' +
      'worker, attempt/worker-config.ts); a final ValidationError after a send comes only from a worker that polls a ' +
      "provider's queue without that provider configured (attempt/pipeline.ts), a path no test records",
  },
  createReconcileEndsWithNews: {
    id: 'create-reconcile-ends-with-news',
    since: 'ef020c0',
    change: "the create's reconcile ends as soon as provider news moved the payment on",
    before: 'the reconcile ran its schedule to the end',
  },
  movementEndsWithNews: {
    id: 'movement-reconcile-ends-with-news',
    since: 'ef020c0',
    change: "a capture's or refund's reconcile ends as soon as the provider's news shows the operation",
    before: 'the reconcile ran its schedule to the end',
  },
  customerActionWait: {
    id: 'customer-action-wait',
    since: 'dd5669b',
    change: "a requires_action payment waits for the customer's action, bounded by CUSTOMER_ACTION_TIMEOUT_MS",
    before: 'no such path (the marker names its commands in the histories that have them)',
  },
  movementResubmits: {
    id: 'movement-reconcile-resubmits',
    since: 'd5ee27f',
    change: "a capture's or refund's reconcile resends the same write under its key after the settle window",
    before: 'review when the look-ups found nothing',
  },
  resubmitsUntilSent: {
    id: 'reconcile-resubmits-until-sent',
    since: '1c5aeec',
    change: 'a resubmission refused before it left is tried again at the next check past the settle window',
    before: 'checking went on without resending, then review ("refused here before sending")',
  },
  resubmitsThroughOutages: {
    id: 'reconcile-resubmits-through-outages',
    since: 'b06ef4e',
    change:
      'a resubmission still refused before it left when the schedule ends is tried again, on doubling waits, while the key lives',
    before: 'review at the end of the schedule ("refused here before sending")',
  },
  unstartedResubmission: {
    id: 'reconcile-unstarted-resubmission',
    since: 'e7f9214',
    change: 'a resubmission that timed out before any worker started it sent nothing: the next check resubmits',
    before: 'counted as a request that may have left: no more resubmissions, review at the end of the schedule',
    unrecorded:
      'an activity that times out before it starts needs the server unable to hand its task to any worker for the ' +
      "whole write budget (the soak's overloaded cluster); no test stages that, the classification is unit-tested",
  },
  resubmitsAfterUnprocessed: {
    id: 'reconcile-resubmits-after-unprocessed',
    since: '482ae05',
    change:
      'a resubmission the provider answered without processing it (429, 503, 409: one request) is tried again at the next check',
    before:
      'counted as a request that may have left: no more resubmissions, review at the end of the schedule ("its outcome unknown")',
  },
  resubmitsWhileUnknown: {
    id: 'reconcile-resubmits-while-unknown',
    since: '356fde7',
    change:
      'a resubmission whose outcome stayed unknown is followed by another at each check that finds nothing, under the same key, while the key lives',
    before:
      'one resubmission that may have left was the last: the reconcile only looked after it, and ended in review if its outcome stayed unknown',
  },
  walletLocalSteps: {
    id: 'wallet-local-steps',
    since: 'e9b33b2',
    change:
      "a wallet part's hold, and a wallet-only payment's capture, are local activities in the payment's first workflow task",
    before:
      'ordinary activities on the workflow task queue, each a workflow task of its own (3 tasks before the answer)',
  },
  walletSettleInTask: {
    id: 'wallet-settle-in-task',
    since: 'ac953ee',
    change:
      "a split payment's hold is captured or released by a local activity in the task where its card part's first call decided it",
    before:
      'by an activity of the settlement, a task later: the first answer read by query waited for that activity and task',
  },
  walletDirectDebit: {
    id: 'wallet-direct-debit',
    since: '15ff210',
    change:
      "a wallet-only payment's hold and capture are one debit: one transaction in one local activity of its first task",
    before: 'a hold and then a capture, two transactions in two local activities of that task',
  },
  reconcileWaitCap: {
    id: 'reconcile-wait-cap',
    since: '581d4ae',
    change:
      "past the schedule, a reconcile's waits double up to the schedule's longest wait, no further: a provider back after a long outage is checked within that wait",
    before:
      'the waits doubled until the key lifetime: after days of failed look-ups the next check could be days away (a 31-day key: up to half of it)',
  },
  continueAfterCancelledReconciles: {
    id: 'continue-after-cancelled-reconciles-end',
    since: 'a831fe1',
    change: 'the run continues as new only once every reconcile the provider news cancelled has ended',
    before: 'continued as new at once (a cancelled reconcile could still be ending)',
  },
  handoffsTogether: {
    id: 'handoffs-together',
    since: '57614cb',
    change:
      "a payment with merchant events and key records hands each change's events and key answers over in one activity",
    before: 'an activity per event and per key answer, each a workflow task to hear back',
  },
  walletSettleAskedFirst: {
    id: 'wallet-settle-in-task-asked-first',
    since: 'f111443',
    change:
      "a split payment asks whether it settles its wallet part in the task before its hold, so a replay knows it however the card part's local first attempt answered",
    before:
      "wallet-settle-in-task asked after the card part's first call: a replay whose local first attempt answered in the task after its marker's took the other path (TMPRL1100)",
  },
  walletNewsInTask: {
    id: 'wallet-news-in-task',
    since: '7cfc890',
    change:
      "a wallet-only payment whose debit the ledger decided hands that decision's news (its event, its key's first answer) over in a local activity of its first task, the activity only when that fails",
    before: "an activity scheduled by the first task's completion, and a second task to hear it back",
  },
  walletSettleLedgerTime: {
    id: 'wallet-settle-ledger-time',
    since: '668110c',
    change:
      "a split payment's settled wallet part stamps its view with the ledger's time of the capture or release, the same in every replay",
    before:
      "the workflow's clock where the settlement's answer was heard: a replay that heard a local settlement's answer a task earlier than the run did (its marker's task) rebuilt a view whose updatedAt differed from the API's answer",
  },
  customerActionCancelContinues: {
    id: 'customer-action-cancel-continues',
    since: '6466911',
    change:
      "an expired customer action whose cancel the provider refuses goes on trying in the next run once the server suggests continuing as new (the wait's state goes with it)",
    before:
      'the run kept cancelling every last-schedule delay without ever continuing as new: a provider that never cancels grew its history without bound',
  },
  walletSplitFirstStep: {
    id: 'wallet-split-first-step',
    since: 'a9c4be8',
    change:
      "a split payment's hold, its card part's local first attempt and the hold's settlement by that attempt's answer are one local activity (src/activities/wallet-first-step.ts); a step it could not make falls back to the steps below",
    before:
      'three local activities of the first task (hold, local first attempt, capture or release), each a round trip between the workflow and the worker',
  },
} as const satisfies Record<string, PatchEntry>;
