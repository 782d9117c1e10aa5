import { Context, type Info } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import { msToNumber } from '@temporalio/common/lib/time';
import type { Logger } from 'pino';
import {
  type Adoption,
  type ChargeFacts,
  type PaymentOwner,
  adoptCandidate,
  metadataVerdict,
} from '../domain/adoption';
import { ErrorType } from '../domain/errors';
import type { ScopeOperation } from '../domain/ids';
import {
  AttemptRecord,
  RejectedAfterUnknown,
  carriedAttemptRecord,
  operationSafety,
  localFirstAttemptMs,
  retrySpecFor,
  type OperationSafety,
  type ProviderOperation,
  type RetryOverrides,
  type RetrySpec,
} from '../domain/retry';
import {
  CircuitOpenError,
  NotSentError,
  OutcomeUnknownError,
  isProviderError,
  isProviderErrorOfType,
} from '../providers/errors';
import { keyHash } from '../providers/logging';
import type {
  CallContext,
  CreatePaymentInput,
  LookupContext,
  PaymentProvider,
  ProviderCapabilities,
  ProviderFailureDetails,
  ProviderPayment,
  ProviderRefund,
} from '../providers/types';
import type { WorkerProviderConfig } from '../domain/provider-payment';
import {
  type BreakerDecision,
  type BreakerOutcome,
  type BreakerReport,
  type CircuitBreaker,
  breakerReport,
} from './breaker';
import { failureDetailsOf, toActivityFailure, type AttemptHistory } from './classify';
import { providerIdempotencyKey } from './keys';

export * from './breaker';
export * from './breaker-counting';
export * from './classify';
export * from './keys';

/** What the activities need; everything with I/O or time is injected (tests pass fakes, the worker the real ones). */
export interface ActivityDeps {
  /** Provider adapters by name (`simulator`, ...); an activity's `provider` argument picks one. */
  readonly providers: Readonly<Record<string, PaymentProvider>>;
  readonly logger: Logger;
  readonly breaker?: CircuitBreaker;
  /** Uniform in [0, 1), for full jitter. Default `Math.random`. */
  readonly random?: () => number;
  /** Epoch ms. Default `Date.now`. */
  readonly now?: () => number;
  /**
   * The worker's retry presets (`RETRY_*`): what a shape-3 charge learns from `firstCreateAttempt` and runs every
   * activity with, and what an activity falls back on when Temporal does not tell it its retry policy.
   */
  readonly retry?: RetryOverrides;
  /**
   * Providers with limits of their own (fleet-wide rate, slots, see `ProviderLimits`): a charge's create reaches them
   * through their activity queue only, where the limits apply, never as a local first attempt.
   */
  readonly providersWithLimits?: readonly string[];
  /** How far the provider's clock may lag ours when matching `created` against a lower bound. Default 60 s. */
  readonly clockSkewToleranceMs?: number;
}

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
}

export interface VoidPaymentArgs extends ScopedArgs {
  readonly paymentId: string;
}

export interface RefundPaymentArgs extends ScopedArgs {
  readonly paymentId: string;
  readonly amount: number;
  /** The refunded total before this refund: how a resend against a provider without keys recognises its own effect. */
  readonly amountRefundedBefore: number;
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
};

/** A charge's local first create attempt (shape 3): the create's arguments and the starter's bound on the attempt. */
export interface FirstCreateArgs extends CreatePaymentArgs {
  /** The attempt's bound (the payment's `localAttemptTimeoutMs`); the worker shortens it to one attempt of its preset. */
  readonly boundMs?: number;
}

/** Why a local first attempt sent nothing: the provider's create may only run on its own queue. */
export type FirstCreateSkipped = 'not_idempotent' | 'provider_limits';

/** What `firstCreateAttempt` answers: the worker's view of the provider, and what the attempt did. */
export type FirstCreateResult = { readonly config: WorkerProviderConfig } & (
  | { readonly attempt: 'settled'; readonly outcome: CreatePaymentOutcome }
  | { readonly attempt: 'not_run'; readonly reason: FirstCreateSkipped }
);

/** The detail a local first attempt's failure carries beside its own: the worker's view of the provider. */
export interface WorkerConfigDetail {
  readonly workerConfig: WorkerProviderConfig;
  /**
   * The delay its classification chose before the next attempt (Retry-After, else full jitter), as on attempt 1 of the
   * activity: the workflow waits it before the activity takes over (a failure's own `nextRetryDelay` does not reach
   * workflow code). Absent when the failure is final.
   */
  readonly retryDelayMs?: number;
}

/** A refund's answer, with the payment as it stands after it (for the totals). */
export interface RefundOutcome {
  /** null when recovered: an earlier attempt's refund was found, not its refund object. */
  readonly refund: ProviderRefund | null;
  readonly payment: ProviderPayment;
  readonly recovered: boolean;
}

/** What one activity execution takes besides its body (see `execute`). */
interface ExecuteOptions {
  /** An earlier operation on this key had an unknown outcome (a reconcile's resubmission): start the record so. */
  readonly afterUnknown?: boolean;
  /** What an attempt outside this activity did first (a local first attempt): carried like an earlier attempt's. */
  readonly before?: { readonly everSent: boolean; readonly everUnknown: boolean };
  /** Aborts the provider call (default: the activity's cancellation; a local first attempt adds its own bound). */
  readonly signal?: AbortSignal;
  /** The provider's capabilities as the payment recorded them: a worker whose adapter differs refuses to send. */
  readonly expectCapabilities?: ProviderCapabilities;
}

/** Builds the activities over injected providers, breaker, logger and clock (STYLE.md #3). */
export const createActivities = (deps: ActivityDeps) => {
  const now = deps.now ?? Date.now;
  const random = deps.random ?? Math.random;
  const skewMs = deps.clockSkewToleranceMs ?? 60_000;

  const providerNamed = (name: string): PaymentProvider => {
    const provider = Object.hasOwn(deps.providers, name) ? deps.providers[name] : undefined;
    if (!provider) {
      throw ApplicationFailure.create({
        type: ErrorType.ValidationError,
        message: `no provider named "${name}" is configured on this worker`,
        nonRetryable: true,
      });
    }
    return provider;
  };

  /** The retry spec this attempt runs under: Temporal's policy and timeouts when it tells us, else our preset. */
  const effectiveSpec = (info: Info, operation: ProviderOperation, capabilities: ProviderCapabilities): RetrySpec => {
    const preset = retrySpecFor(operation, capabilities, deps.retry?.[operation]);
    // A local first attempt is attempt 1 of the create, not an activity of its own: its failure is classified with the
    // create's preset (the delay before the activity takes over, or the budget exhausted), never with the local
    // activity's one-attempt policy, so the workflow and the metrics see what attempt 1 on the provider's queue would.
    if (info.isLocal) return preset;
    const policy = info.retryPolicy;
    const ms = (d: Parameters<typeof msToNumber>[0] | undefined, fallback: number) =>
      d === undefined || d === null ? fallback : msToNumber(d) || fallback;
    return {
      ...preset,
      initialIntervalMs: ms(policy?.initialInterval, preset.initialIntervalMs),
      backoffCoefficient: policy?.backoffCoefficient || preset.backoffCoefficient,
      maximumIntervalMs: ms(policy?.maximumInterval, preset.maximumIntervalMs),
      maximumAttempts: policy?.maximumAttempts || preset.maximumAttempts,
      budgetMs: info.scheduleToCloseTimeoutMs > 0 ? info.scheduleToCloseTimeoutMs : preset.budgetMs,
      attemptTimeoutMs: info.startToCloseTimeoutMs > 0 ? info.startToCloseTimeoutMs : preset.attemptTimeoutMs,
    };
  };

  /**
   * The provider as one attempt uses it: every call carries the activity's cancellation (so an attempt that Temporal
   * gave up, or a cancelled workflow, stops sending), and every write heartbeats the attempt record right before it is
   * sent and right after its outcome is classified, so the next attempt knows what this one may have done. `wrote`
   * says whether this attempt's write reached for the provider (the breaker's probe is decided only by one that did).
   */
  const attemptProvider = (
    provider: PaymentProvider,
    base: LookupContext,
    record: { current: AttemptRecord; wrote: boolean },
    beat: () => void,
  ): PaymentProvider => {
    const readCtx = (ctx?: LookupContext): LookupContext => ({ ...base, ...ctx, ...withSignal(base.signal) });
    const writeCtx = (ctx: CallContext): CallContext => ({ ...ctx, ...withSignal(base.signal) });
    const write = async <T>(send: () => Promise<T>): Promise<T> => {
      record.current = { ...record.current, inFlight: true };
      beat();
      const sends = record.current.sends ?? 0;
      try {
        const value = await send();
        record.current = { ...record.current, everSent: true, inFlight: false, sends: sends + 1 };
        record.wrote = true;
        return value;
      } catch (err) {
        const { type, reason } = failureDetailsOf(err, 'create');
        // Refused at connect, it still tested the provider; cut off by our own cancellation first, it did not.
        record.wrote ||= !(type === ErrorType.NotSent && reason === 'cancelled');
        const left = type !== ErrorType.NotSent && type !== ErrorType.CircuitOpen;
        record.current = {
          everSent: record.current.everSent || left,
          everUnknown: record.current.everUnknown || type === ErrorType.OutcomeUnknown,
          inFlight: false,
          sends: left ? sends + 1 : sends,
        };
        throw err;
      } finally {
        beat();
      }
    };
    return {
      name: provider.name,
      capabilities: provider.capabilities,
      createPayment: (input, ctx) => write(() => provider.createPayment(input, writeCtx(ctx))),
      capturePayment: (id, body, ctx) => write(() => provider.capturePayment(id, body, writeCtx(ctx))),
      voidPayment: (id, ctx) => write(() => provider.voidPayment(id, writeCtx(ctx))),
      refundPayment: (id, body, ctx) => write(() => provider.refundPayment(id, body, writeCtx(ctx))),
      getPayment: (id, ctx) => provider.getPayment(id, readCtx(ctx)),
      findByIdempotencyKey: (key, ctx) => provider.findByIdempotencyKey(key, readCtx(ctx)),
      findByReference: (reference, ctx) => provider.findByReference(reference, readCtx(ctx)),
      listPayments: (query, ctx) => provider.listPayments(query, readCtx(ctx)),
    };
  };

  // The breaker is advisory: if its store fails, calls go ahead (fail open) rather than fail for a reason of ours.
  const acquire = async (provider: string, log: Logger): Promise<BreakerDecision> => {
    try {
      return deps.breaker ? await deps.breaker.acquire(provider) : { allowed: true };
    } catch (err) {
      log.error({ err }, 'circuit breaker unavailable; calling the provider anyway');
      return { allowed: true };
    }
  };
  const record = async (provider: string, outcome: BreakerOutcome, report: BreakerReport, log: Logger) => {
    try {
      await deps.breaker?.record(provider, outcome, report);
    } catch (err) {
      log.error({ err }, 'circuit breaker unavailable; outcome not recorded');
    }
  };

  interface Step {
    readonly provider: PaymentProvider;
    readonly attempt: number;
    readonly safety: OperationSafety;
    /** Set for writes: the key sent to the provider. */
    readonly idempotencyKey?: string;
    readonly ctx: CallContext;
    /** Epoch ms when the activity was first scheduled. */
    readonly scheduledAtMs: number;
    /** A provider without keys, on a retry: look before sending again. */
    readonly mustLookBeforeResend: boolean;
    /** How many writes this activity's attempts may have sent so far (earlier attempts' included). */
    sends(): number;
  }

  interface Outcome<T> {
    readonly value: T;
    /** For the log: `succeeded`, `declined`, `recovered`, `not_found`. */
    readonly outcome: string;
  }

  /**
   * One activity execution: breaker check, the provider call(s), classification of any failure into a typed
   * ApplicationFailure, exactly one breaker record and one log line.
   */
  const execute = async <T>(
    activity: string,
    operation: ProviderOperation,
    providerName: string,
    scope:
      | {
          readonly merchantId: string;
          readonly operation: ScopeOperation;
          readonly key: string;
          readonly keyProvider?: string;
        }
      | undefined,
    body: (step: Step) => Promise<Outcome<T>>,
    opts: ExecuteOptions = {},
  ): Promise<T> => {
    const { afterUnknown = false, before, signal, expectCapabilities } = opts;
    const provider = providerNamed(providerName);
    const context = Context.current();
    const { info } = context;
    const attempt = info.attempt;
    const safety = operationSafety(operation, provider.capabilities);
    const idempotencyKey =
      scope === undefined
        ? undefined
        : providerIdempotencyKey(scope.merchantId, scope.operation, scope.key, scope.keyProvider);
    const hash = idempotencyKey === undefined ? undefined : keyHash(idempotencyKey);
    const log = deps.logger.child({ activity, provider: provider.name, attempt, ...(hash ? { keyHash: hash } : {}) });
    const started = now();

    // What earlier attempts did (their heartbeat details), and what this one adds as it goes.
    const earlier = AttemptRecord.safeParse(info.heartbeatDetails);
    const fromHeartbeat = carriedAttemptRecord(info.heartbeatDetails);
    // `before` and `afterUnknown` say what was done outside this activity: they decide safety, not its own sends.
    const fromAttempts =
      before === undefined
        ? fromHeartbeat
        : {
            ...fromHeartbeat,
            everSent: fromHeartbeat.everSent || before.everSent,
            everUnknown: fromHeartbeat.everUnknown || before.everUnknown,
          };
    const carried = afterUnknown ? { ...fromAttempts, everSent: true, everUnknown: true } : fromAttempts;
    const attempts = { current: carried, wrote: false };
    const history = (): AttemptHistory | undefined =>
      safety === 'read'
        ? undefined
        : {
            everSent: attempts.current.everSent,
            everUnknown: attempts.current.everUnknown,
            sends: attempts.current.sends ?? 0,
            ...(earlier.success ? { earlier: earlier.data } : {}),
          };
    // A local activity (a charge's local first attempt) has no heartbeat: the core refuses one with a warning per call.
    const beat = () => {
      if (!info.isLocal) context.heartbeat(attempts.current);
    };

    // The retry spec follows the provider's capabilities as the payment recorded them where it says (this worker's may
    // differ, and then this attempt refuses to send), else this worker's.
    const classify = (err: unknown) => {
      const h = history();
      return toActivityFailure(err, {
        operation,
        safety,
        provider: provider.name,
        attempt,
        spec: effectiveSpec(info, operation, expectCapabilities ?? provider.capabilities),
        elapsedMs: now() - info.scheduledTimestampMs,
        random,
        ...(h === undefined ? {} : { history: h }),
      });
    };

    // A worker whose adapter differs from the one the payment recorded never sends for it (wrong safety, wrong timeouts).
    if (expectCapabilities !== undefined) {
      const differs = capabilitiesDiffer(provider, expectCapabilities);
      if (differs !== undefined) throw refuseToSend(operation, differs, attempts.current, classify, beat, log);
    }

    // The breaker gates writes only: it exists to stop piling new, possibly-unknown effects onto a failing provider.
    // Reads are how a reconcile learns the truth; they go through (and still report their outcome to the breaker).
    const decision: BreakerDecision = safety === 'read' ? { allowed: true } : await acquire(provider.name, log);
    if (!decision.allowed) {
      const failure = classify(
        new CircuitOpenError({ operation, reason: 'breaker_open', retryAfterMs: decision.retryAfterMs }),
      );
      // Keep what earlier attempts did for the next one (details persist only when some attempt records them).
      if (info.attempt > 1) beat();
      log.warn(
        { outcome: ErrorType.CircuitOpen, failure: failure.type, nextRetryDelay: failure.nextRetryDelay },
        'activity',
      );
      throw failure;
    }

    // Heartbeats between sends too: Temporal delivers a cancellation (the attempt timed out, the workflow was
    // cancelled) only in answer to one, and the signal below is how it reaches the HTTP call in flight.
    const ticker = setInterval(beat, Math.max(1_000, Math.floor((info.heartbeatTimeoutMs || 20_000) / 4)));
    ticker.unref();
    const requestId = `req_${hash ?? activity}_${attempt}`;
    try {
      const result = await body({
        provider: attemptProvider(
          provider,
          { requestId, attempt, signal: signal ?? context.cancellationSignal },
          attempts,
          beat,
        ),
        attempt,
        safety,
        ...(idempotencyKey === undefined ? {} : { idempotencyKey }),
        ctx: { idempotencyKey: idempotencyKey ?? '', attempt, requestId },
        scheduledAtMs: info.scheduledTimestampMs,
        mustLookBeforeResend: attempt > 1 && safety === 'non-idempotent-write',
        sends: () => attempts.current.sends ?? 0,
      });
      await record(provider.name, 'success', breakerReport(safety, decision, undefined, attempts.wrote), log);
      log.info({ outcome: result.outcome, durationMs: now() - started }, 'activity');
      return result.value;
    } catch (caught) {
      const details = failureDetailsOf(caught, operation);
      await record(provider.name, details.type, breakerReport(safety, decision, details, attempts.wrote), log);
      const err = safety === 'read' ? caught : rejectedAfterUnknown(caught, operation, carried);
      const failure = classify(err);
      log.warn(
        {
          outcome: failureDetailsOf(err, operation).type,
          failure: failure.type,
          nonRetryable: failure.nonRetryable,
          nextRetryDelay: failure.nextRetryDelay,
          reason: isProviderError(err) ? err.details.reason : 'unexpected_error',
          ...history(),
          durationMs: now() - started,
        },
        'activity',
      );
      throw failure;
    } finally {
      clearInterval(ticker);
    }
  };

  /**
   * After an earlier attempt's outcome was unknown, a refusal of this attempt's request says nothing about that one's
   * effect (a 401 after a key rotation, a 400 from a changed validation): it becomes OutcomeUnknown
   * (`rejected_after_unknown`, non-retryable) so the workflow reconciles instead of marking the payment failed. Only an
   * answer about the key itself stands: a key mismatch, or the provider replaying its stored answer for the key.
   */
  const rejectedAfterUnknown = (err: unknown, operation: ProviderOperation, carried: AttemptRecord): unknown => {
    if (!carried.everUnknown || !isProviderErrorOfType(err, ErrorType.ProviderRejected)) return err;
    if (isAnswerAboutTheKey(err.details)) return err;
    const { status, code } = err.details;
    return new OutcomeUnknownError(
      {
        operation,
        ...(status === undefined ? {} : { status }),
        ...(code === undefined ? {} : { code }),
        reason: RejectedAfterUnknown,
      },
      { cause: err },
    );
  };

  /**
   * A look-up made before a resend failed. This attempt sent nothing, so whatever went wrong with the read, the write
   * did not happen now: NotSent (retryable, the cause kept) unless the provider refused outright.
   */
  const lookupBeforeResend = async <T>(operation: ProviderOperation, read: () => Promise<T>): Promise<T> => {
    try {
      return await read();
    } catch (err) {
      if (
        isProviderError(err) &&
        (err.type === ErrorType.ProviderRejected || err.type === ErrorType.ProviderUnavailable)
      ) {
        throw err;
      }
      throw new NotSentError({ operation, reason: 'lookup_before_resend_failed' }, { cause: err });
    }
  };

  const unverifiable = (operation: ProviderOperation, why: string) =>
    // Cannot prove an earlier attempt did nothing, so a resend could double it: let the workflow reconcile instead.
    new OutcomeUnknownError({ operation, reason: why });

  // All merchants share one provider account: a search by reference sees every merchant's payments of that order. Only
  // a payment whose metadata names this merchant and key, or the one metadata-less payment matching every field, is ours.
  const adoptByReference = async (
    provider: PaymentProvider,
    owner: PaymentOwner,
    facts: ChargeFacts,
  ): Promise<Adoption<ProviderPayment>> =>
    adoptCandidate(await provider.findByReference(facts.reference), owner, facts, skewMs);

  /** The create: one attempt of `createPayment` (or a charge's local first attempt, bounded by `signal`). */
  const create = async (args: CreatePaymentArgs, signal?: AbortSignal): Promise<CreatePaymentOutcome> => {
    const scope = {
      merchantId: args.merchantId,
      operation: 'create' as const,
      key: args.key,
      ...(args.keyProvider === undefined ? {} : { keyProvider: args.keyProvider }),
    };
    return execute<CreatePaymentOutcome>(
      'createPayment',
      'create',
      args.provider,
      scope,
      async (step) => {
        if (step.mustLookBeforeResend) {
          const notBeforeMs = args.notBeforeMs ?? step.scheduledAtMs;
          const adoption = await lookupBeforeResend('create', async (): Promise<Adoption<ProviderPayment>> => {
            const { capabilities } = step.provider;
            if (capabilities.lookupByKey && step.idempotencyKey !== undefined) {
              const byKey = await step.provider.findByIdempotencyKey(step.idempotencyKey);
              return byKey ? { kind: 'adopt', payment: byKey, by: 'key' } : { kind: 'none' };
            }
            if (!capabilities.lookupByReference) throw unverifiable('create', 'no_lookup_to_verify_resend');
            return adoptByReference(
              step.provider,
              { merchantId: args.merchantId, key: args.key },
              {
                amount: args.input.amount,
                currency: args.input.currency,
                reference: args.input.reference,
                notBeforeMs,
              },
            );
          });
          if (adoption.kind === 'ambiguous') throw unverifiable('create', 'ambiguous_lookup_before_resend');
          const found = adoption.kind === 'adopt' ? adoption.payment : undefined;
          if (found) {
            const outcome =
              found.status === 'succeeded' || found.status === 'requires_action' ? found.status : 'authorized';
            const value = { outcome, payment: found, replayed: true, recovered: true, sends: step.sends() } as const;
            return { value, outcome: 'recovered' };
          }
        }
        const result = await step.provider.createPayment(args.input, step.ctx);
        if (result.outcome === 'declined') {
          const value = { outcome: 'declined', declineCode: result.declineCode, sends: step.sends() } as const;
          return { value, outcome: 'declined' };
        }
        return { value: { ...result, recovered: false, sends: step.sends() }, outcome: 'succeeded' };
      },
      {
        afterUnknown: args.afterUnknown === true,
        ...(args.earlier === undefined ? {} : { before: args.earlier }),
        ...(signal === undefined ? {} : { signal }),
        ...(args.expectCapabilities === undefined ? {} : { expectCapabilities: args.expectCapabilities }),
      },
    );
  };

  const limited = new Set(deps.providersWithLimits ?? []);
  const workerConfigOf = (provider: PaymentProvider): WorkerProviderConfig => ({
    capabilities: { ...provider.capabilities },
    retry: deps.retry ?? {},
  });

  return {
    /** The provider's capability flags (a local activity: the workflow derives its retry policies from them). */
    async describeProvider(provider: string): Promise<ProviderCapabilities> {
      const { capabilities } = providerNamed(provider);
      return { ...capabilities };
    },

    /** Creates (authorizes, or authorizes and captures) a payment under the key derived from the charge's scope. */
    async createPayment(args: CreatePaymentArgs): Promise<CreatePaymentOutcome> {
      return create(args);
    },

    /**
     * A shape-3 charge's first step, as a local activity in its first workflow task: this worker's view of the
     * provider (its adapter's capabilities, the worker's retry presets), recorded in the marker, and, against a
     * provider that honours idempotency keys and has no limits of its own, the create's first attempt, bounded by
     * `boundMs` (never longer than one attempt of the create preset): the provider call is aborted at the bound, so its
     * failure, like any other, says what may have been sent and carries this worker's view too.
     */
    async firstCreateAttempt(args: FirstCreateArgs): Promise<FirstCreateResult> {
      const { boundMs, ...createArgs } = args;
      const config = workerConfigOf(providerNamed(args.provider));
      const { capabilities } = config;
      const notRun: FirstCreateSkipped | undefined = !capabilities.idempotencyKeys
        ? 'not_idempotent'
        : limited.has(args.provider)
          ? 'provider_limits'
          : undefined;
      if (notRun !== undefined) return { config, attempt: 'not_run', reason: notRun };
      const bound = AbortSignal.timeout(localFirstAttemptMs(boundMs, capabilities, config.retry));
      const signal = AbortSignal.any([Context.current().cancellationSignal, bound]);
      try {
        return { config, attempt: 'settled', outcome: await create(createArgs, signal) };
      } catch (err) {
        throw withWorkerConfig(err, config);
      }
    },

    /** This worker's view of a provider (capabilities, retry presets): a shape-3 charge whose first step lost it. */
    async describeWorkerProvider(provider: string): Promise<WorkerProviderConfig> {
      return workerConfigOf(providerNamed(provider));
    },

    /** Captures an authorized payment (all of it when `amount` is absent) under the capture's own key. */
    async capturePayment(args: CapturePaymentArgs): Promise<ProviderPayment> {
      const scope = { merchantId: args.merchantId, operation: 'capture' as const, key: args.key };
      return execute('capturePayment', 'capture', args.provider, scope, async (step) => {
        if (step.mustLookBeforeResend) {
          const current = await lookupBeforeResend('capture', () => step.provider.getPayment(args.paymentId));
          const before = args.amountCapturedBefore ?? 0;
          if (current && current.amountCaptured >= before + (args.amount ?? current.amount - before)) {
            return { value: current, outcome: 'recovered' };
          }
        }
        const body = args.amount === undefined ? {} : { amount: args.amount };
        return { value: await step.provider.capturePayment(args.paymentId, body, step.ctx), outcome: 'succeeded' };
      });
    },

    /** Voids (releases) an authorized payment. */
    async voidPayment(args: VoidPaymentArgs): Promise<ProviderPayment> {
      const scope = { merchantId: args.merchantId, operation: 'void' as const, key: args.key };
      return execute('voidPayment', 'void', args.provider, scope, async (step) => {
        if (step.mustLookBeforeResend) {
          const current = await lookupBeforeResend('void', () => step.provider.getPayment(args.paymentId));
          if (current?.status === 'voided') return { value: current, outcome: 'recovered' };
        }
        return { value: await step.provider.voidPayment(args.paymentId, step.ctx), outcome: 'succeeded' };
      });
    },

    /** Refunds `amount` of a captured payment under the refund's own key; answers the payment as it stands after. */
    async refundPayment(args: RefundPaymentArgs): Promise<RefundOutcome> {
      const scope = { merchantId: args.merchantId, operation: 'refund' as const, key: args.key };
      return execute<RefundOutcome>('refundPayment', 'refund', args.provider, scope, async (step) => {
        if (step.mustLookBeforeResend) {
          const current = await lookupBeforeResend('refund', () => step.provider.getPayment(args.paymentId));
          if (current && current.amountRefunded >= args.amountRefundedBefore + args.amount) {
            return { value: { refund: null, payment: current, recovered: true }, outcome: 'recovered' };
          }
        }
        const refund = await step.provider.refundPayment(args.paymentId, { amount: args.amount }, step.ctx);
        // The refund is committed: whatever this read answers, it is not a refusal of the refund. Unknown: the retry
        // replays it (keys) or the workflow reconciles it (no keys).
        const payment = await step.provider.getPayment(args.paymentId).catch((err: unknown) => {
          throw new OutcomeUnknownError({ operation: 'refund', reason: 'read_after_refund_failed' }, { cause: err });
        });
        if (!payment) throw unverifiable('refund', 'payment_missing_after_refund');
        return { value: { refund, payment, recovered: false }, outcome: 'succeeded' };
      });
    },

    /**
     * Looks a write up at the provider: by payment id when known, else by the derived key when the provider can, else
     * by reference, adopting only a payment whose metadata names this merchant and key, or the one payment without
     * metadata that matches every field of `match`. Null when nothing is there, and when several could be ours (an
     * ambiguity is never guessed: the write stays unknown and ends with an operator).
     */
    async lookupPayment(args: LookupPaymentArgs): Promise<ProviderPayment | null> {
      const scope = {
        merchantId: args.merchantId,
        operation: args.operation,
        key: args.key,
        ...(args.keyProvider === undefined ? {} : { keyProvider: args.keyProvider }),
      };
      const owner: PaymentOwner = { merchantId: args.merchantId, key: args.key };
      return execute('lookupPayment', 'lookup', args.provider, scope, async (step) => {
        let ambiguous = false;
        const found = await (async (): Promise<ProviderPayment | null> => {
          if (args.paymentId !== undefined) return step.provider.getPayment(args.paymentId);
          const { capabilities } = step.provider;
          // Providers index payments by the key that created them; captures and refunds are read by payment id.
          if (capabilities.lookupByKey && step.idempotencyKey !== undefined && args.operation === 'create') {
            return step.provider.findByIdempotencyKey(step.idempotencyKey);
          }
          if (!capabilities.lookupByReference) return null;
          const { match } = args;
          // Without `match` nothing but metadata naming us can make a payment ours: no fields to check it against.
          if (match === undefined) {
            const all = await step.provider.findByReference(args.reference);
            const named = all.filter((p) => metadataVerdict(p.metadata, owner) === 'ours');
            return named.length === 1 ? (named[0] ?? null) : null;
          }
          const adoption = await adoptByReference(step.provider, owner, {
            amount: match.amount,
            currency: match.currency,
            reference: args.reference,
            ...(match.createdGteMs === undefined ? {} : { notBeforeMs: match.createdGteMs }),
          });
          if (adoption.kind === 'ambiguous') ambiguous = true;
          return adoption.kind === 'adopt' ? adoption.payment : null;
        })();
        return { value: found, outcome: found ? 'succeeded' : ambiguous ? 'ambiguous' : 'not_found' };
      });
    },

    /** One page of the provider's payments by creation time (for the unknown-payment sweep and audits). */
    async listProviderPayments(args: ListProviderPaymentsArgs): Promise<{ data: ProviderPayment[]; hasMore: boolean }> {
      return execute('listProviderPayments', 'list', args.provider, undefined, async (step) => {
        const page = await step.provider.listPayments({
          ...(args.createdGte === undefined ? {} : { createdGte: args.createdGte }),
          ...(args.createdLt === undefined ? {} : { createdLt: args.createdLt }),
          ...(args.startingAfter === undefined ? {} : { startingAfter: args.startingAfter }),
          ...(args.limit === undefined ? {} : { limit: args.limit }),
        });
        return { value: { data: [...page.data], hasMore: page.hasMore }, outcome: 'succeeded' };
      });
    },
  };
};

/** A refusal that answers about the idempotency key itself: a key mismatch, or the key's stored answer replayed. */
const isAnswerAboutTheKey = (details: ProviderFailureDetails): boolean =>
  details.code === 'idempotency_key_mismatch' || details.replayed === true;

const withSignal = (signal: AbortSignal | undefined): { signal?: AbortSignal } =>
  signal === undefined ? {} : { signal };

/**
 * Why the payment's recorded view of a provider is not this worker's, or undefined when it is: idempotency keys and
 * their lifetime decide whether a retry is safe, and the call limits decide the attempt timeout.
 */
function capabilitiesDiffer(provider: PaymentProvider, expected: ProviderCapabilities): string | undefined {
  const actual = provider.capabilities;
  const same =
    actual.idempotencyKeys === expected.idempotencyKeys &&
    actual.keyTtlSeconds === expected.keyTtlSeconds &&
    actual.lookupByKey === expected.lookupByKey &&
    actual.lookupByReference === expected.lookupByReference &&
    (expected.callLimits === undefined ||
      (actual.callLimits?.callTimeoutMs === expected.callLimits.callTimeoutMs &&
        actual.callLimits.referencePages === expected.callLimits.referencePages));
  return same
    ? undefined
    : `provider "${provider.name}": the capabilities the payment was started with differ from this worker's (check the PROVIDER_* settings of the workers)`;
}

/**
 * This worker refuses to send for a payment configured otherwise. With nothing sent before (no earlier attempt, no
 * local first attempt that may have left, no unknown outcome on the key), that is a refusal before any attempt: a
 * final `ValidationError` saying nothing was sent. Once an earlier attempt may have been sent, the payment's outcome is
 * the provider's, not ours to call failed: a retryable NotSent (`worker_config_mismatch`) carrying that record, so
 * the next attempt may land on a worker that matches, and a budget spent on refusals ends with `everSent` and the
 * workflow reconciles.
 */
function refuseToSend(
  operation: ProviderOperation,
  why: string,
  record: AttemptRecord,
  classify: (err: unknown) => ApplicationFailure,
  beat: () => void,
  log: Logger,
): ApplicationFailure {
  if (!record.everSent) {
    log.warn({ outcome: ErrorType.ValidationError }, why);
    return ApplicationFailure.create({
      type: ErrorType.ValidationError,
      message: `${why}; nothing was sent`,
      nonRetryable: true,
      details: [{ everSent: false, everUnknown: false, sends: 0 }],
    });
  }
  // Keep what earlier attempts did for the next one.
  beat();
  const failure = classify(new NotSentError({ operation, reason: 'worker_config_mismatch' }));
  log.warn({ outcome: ErrorType.NotSent, failure: failure.type, nextRetryDelay: failure.nextRetryDelay }, why);
  return failure;
}

/**
 * A local first attempt's failure, as it was, with the worker's view of the provider appended to its details: the
 * workflow reads the attempt record from the first detail as from any create failure, and its configuration from this.
 */
function withWorkerConfig(err: unknown, workerConfig: WorkerProviderConfig): unknown {
  if (!(err instanceof ApplicationFailure)) return err;
  return ApplicationFailure.create({
    ...(err.type == null ? {} : { type: err.type }),
    message: err.message,
    nonRetryable: err.nonRetryable === true,
    ...(err.nextRetryDelay == null ? {} : { nextRetryDelay: err.nextRetryDelay }),
    ...(err.cause === undefined ? {} : { cause: err.cause }),
    details: [
      ...(err.details ?? [undefined]),
      {
        workerConfig,
        ...(err.nonRetryable || err.nextRetryDelay == null ? {} : { retryDelayMs: msToNumber(err.nextRetryDelay) }),
      } satisfies WorkerConfigDetail,
    ],
  });
}

/** The activities' type, for `proxyActivities<Activities>` in workflows (type import only). */
export type Activities = ReturnType<typeof createActivities>;
