/**
 * The provider activities' contract: the arguments each takes and the answers it gives, which workflow code imports as
 * types (through `src/activities`, the barrel) to call the activities with `proxyActivities<Activities>`.
 */
import type { ScopeOperation } from '../domain/ids';
import type { WorkerProviderConfig } from '../domain/provider-payment';
import type { CreatePaymentInput, ProviderCapabilities, ProviderPayment, ProviderRefund } from '../providers/types';
import type { HoldArgs } from '../wallets';

/** The arguments every write carries: which provider, and the scope its idempotency key is derived from. */
export interface ScopedArgs {
  readonly provider: string;
  readonly merchantId: string;
  /** The order service's key of this intent (payment, capture or refund key). Never sent, never logged. */
  readonly key: string;
  /**
   * Set when a charge failed over to this provider: the idempotency key is scoped to it (`scopeOf`), so it differs
   * from the key the first provider was (never) sent. Absent: the payment's first provider, the plain scope.
   */
  readonly keyProvider?: string;
}

export interface CreatePaymentArgs extends ScopedArgs {
  readonly input: CreatePaymentInput;
  /**
   * Epoch ms: a payment created before this is not ours (used by the look-up-before-resend against a provider without
   * keys). Default: when this activity was first scheduled. Pass the workflow's first send time when a later
   * activity re-sends the same charge.
   */
  readonly notBeforeMs?: number;
  /**
   * The capabilities the payment recorded for this provider (its starter's, or the worker's view its first step
   * recorded). Checked against this worker's adapter before anything is sent, never sending with the wrong safety: with
   * nothing sent before, the refusal is final (`ValidationError`); once an earlier attempt may have been sent, this
   * worker refuses as not sent and the activity retries within its budget, for a worker that matches (see `execute`).
   */
  readonly expectCapabilities?: ProviderCapabilities;
  /**
   * This send repeats one whose outcome was unknown (a reconcile's resubmission with the same key): only an answer
   * about the key (its stored answer, a key mismatch) or a decline decides; any other refusal stays unknown.
   */
  readonly afterUnknown?: boolean;
  /**
   * What a local first attempt of this create did before this activity took over (shape 3), as its failure reported
   * it: carried like an earlier attempt's heartbeat record, so this activity's failures and its refusals say what the
   * provider may have seen across both.
   */
  readonly earlier?: { readonly everSent: boolean; readonly everUnknown: boolean };
}

export interface CapturePaymentArgs extends ScopedArgs {
  readonly paymentId: string;
  /** Absent: everything still authorized. */
  readonly amount?: number;
  /** The captured total before this capture (default 0): how a resend recognises its own earlier effect. */
  readonly amountCapturedBefore?: number;
  /** A reconcile's resubmission after an unknown outcome: see {@link CreatePaymentArgs.afterUnknown}. */
  readonly afterUnknown?: boolean;
}

export interface VoidPaymentArgs extends ScopedArgs {
  readonly paymentId: string;
}

export interface RefundPaymentArgs extends ScopedArgs {
  readonly paymentId: string;
  readonly amount: number;
  /** The refunded total before this refund: how a resend against a provider without keys recognises its own effect. */
  readonly amountRefundedBefore: number;
  /** A reconcile's resubmission after an unknown outcome: see {@link CreatePaymentArgs.afterUnknown}. */
  readonly afterUnknown?: boolean;
}

export interface LookupPaymentArgs extends ScopedArgs {
  /** The write being looked up; with `key` it gives the provider key to search by. */
  readonly operation: ScopeOperation;
  /** Our order id (the provider's `reference`). */
  readonly reference: string;
  /** Known for capture/void/refund: then the payment is read by id. */
  readonly paymentId?: string;
  /** Narrows a lookup by reference to payments that could be this charge. */
  readonly match?: { readonly amount: number; readonly currency: string; readonly createdGteMs?: number };
}

export interface ListProviderPaymentsArgs {
  readonly provider: string;
  /** Unix seconds (provider clock), inclusive. */
  readonly createdGte?: number;
  /** Unix seconds (provider clock), exclusive. */
  readonly createdLt?: number;
  readonly startingAfter?: string;
  readonly limit?: number;
}

/** A charge's answer: a payment (sent, replayed by the provider, or recovered by a look-up) or a decline. */
export type CreatePaymentOutcome = (
  | {
      /** `requires_action`: the customer must act (`payment.nextAction`); the payment waits for the provider's word. */
      readonly outcome: 'succeeded' | 'authorized' | 'requires_action';
      readonly payment: ProviderPayment;
      /** The provider replayed a stored answer for our key. */
      readonly replayed: boolean;
      /** Found by the look-up-before-resend (provider without keys): nothing was sent this attempt. */
      readonly recovered: boolean;
    }
  | { readonly outcome: 'declined'; readonly declineCode: string }
) & {
  /**
   * How many create requests this activity's attempts may have sent, this one's included (what the payment's view
   * counts as `attempts`). Absent in results recorded before it was counted: one.
   */
  readonly sends?: number;
  /**
   * When the provider's answer came (this worker's clock), recorded with the result: the payment's view takes it, so
   * every replay and a query that applies the result ahead of its task stamp the same time. Absent before.
   */
  readonly at?: string;
};

/** A charge's local first create attempt (shape 3): the create's arguments and the starter's bound on the attempt. */
export interface FirstCreateArgs extends CreatePaymentArgs {
  /** The attempt's bound (the payment's `localAttemptTimeoutMs`); the worker shortens it to one attempt of its preset. */
  readonly boundMs?: number;
  /**
   * The workflow's time in the activation that scheduled the attempt (the server's start of that workflow task). An
   * attempt that starts a workflow task timeout ({@link FirstCreateArgs.taskTimeoutMs}) or more later is a run again
   * of one a dead worker may have sent.
   */
  readonly scheduledInTaskAtMs?: number;
  /** The payment's workflow task timeout; default {@link LOCAL_RERUN_GAP_MS}. */
  readonly taskTimeoutMs?: number;
  /**
   * A split payment's wallet part (patch `wallet-split-first-step`): held before anything is sent, and settled in the
   * same local activity once the attempt's answer decides it (see {@link WalletFirstStep}).
   */
  readonly wallet?: HoldArgs;
}

/**
 * What a split payment's local first step did with its wallet part: held (else nothing was sent: the workflow's own
 * hold decides the payment), and settled when the attempt's answer decided it (the provider's success captures, its
 * decline or refusal releases), with the ledger's time of that entry. Carried by the result, or by the failure as a
 * detail of its own.
 */
export interface WalletFirstStep {
  readonly held: boolean;
  readonly settled?: { readonly kind: 'capture' | 'release'; readonly at: string };
}

/**
 * A local first attempt starts when the activation that schedules it ends, within the workflow task's timeout (a
 * slower activation times the task out, and its retry counts the attempt anyway). One that starts a task timeout or
 * more after the task began is the same attempt run again by the next worker: the first task completed while the
 * attempt was out (a query that waited with the task is answered at once and completes it; a long attempt heartbeats
 * it), its worker died with the attempt sent, and no marker records it, so the workflow replays a clean first task and
 * schedules it again. The dead worker's task is handed on only after its timeout (start-to-close: the task timeout;
 * sticky schedule-to-start: the SDK's 10 s, which the workers keep), so a re-run always comes that late. A 5 s gap
 * mistook two first activations of workers just restarted on an overloaded cluster for re-runs (CI soak on 8b64965).
 * A false "re-run" only reconciles what would have failed or failed over.
 */
export const LOCAL_RERUN_GAP_MS = 10_000;

/** Why a local first attempt sent nothing: the provider's create may only run on its own queue. */
export type FirstCreateSkipped = 'not_idempotent' | 'provider_limits';

/** What `firstCreateAttempt` answers: the worker's view of the provider, and what the attempt did. */
export type FirstCreateResult =
  | ({
      readonly config: WorkerProviderConfig;
      /** The attempt was a run again of one a dead worker may have sent (see {@link LOCAL_RERUN_GAP_MS}). */
      readonly rerunOfLost?: true;
      /** With {@link FirstCreateArgs.wallet}: held, and what settled it. */
      readonly wallet?: WalletFirstStep;
    } & (
      | { readonly attempt: 'settled'; readonly outcome: CreatePaymentOutcome }
      | { readonly attempt: 'not_run'; readonly reason: FirstCreateSkipped }
    ))
  /** With {@link FirstCreateArgs.wallet}: the wallet part was not held (short funds, a refusal, database trouble). */
  | { readonly attempt: 'wallet_not_held' };

/** The detail a local first attempt's failure carries beside its own: the worker's view of the provider. */
export interface WorkerConfigDetail {
  readonly workerConfig: WorkerProviderConfig;
  /**
   * The delay its classification chose before the next attempt (Retry-After, else full jitter), as on attempt 1 of the
   * activity: the workflow waits it before the activity takes over (a failure's own `nextRetryDelay` does not reach
   * workflow code). Absent when the failure is final.
   */
  readonly retryDelayMs?: number;
  /** The attempt was a run again of one a dead worker may have sent (see {@link LOCAL_RERUN_GAP_MS}): counted once. */
  readonly rerunOfLost?: true;
}

/** A refund's answer, with the payment as it stands after it (for the totals). */
export interface RefundOutcome {
  /** null when recovered: an earlier attempt's refund was found, not its refund object. */
  readonly refund: ProviderRefund | null;
  readonly payment: ProviderPayment;
  readonly recovered: boolean;
}
