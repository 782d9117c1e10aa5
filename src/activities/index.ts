import { Context, type Info } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import { msToNumber } from '@temporalio/common/lib/time';
import type { Logger } from 'pino';
import { ErrorType } from '../domain/errors';
import type { ScopeOperation } from '../domain/ids';
import {
  operationSafety,
  retrySpecFor,
  type OperationSafety,
  type ProviderOperation,
  type RetryOverrides,
  type RetrySpec,
} from '../domain/retry';
import { CircuitOpenError, NotSentError, OutcomeUnknownError, isProviderError } from '../providers/errors';
import { keyHash } from '../providers/logging';
import type {
  CallContext,
  CreatePaymentInput,
  PaymentProvider,
  ProviderCapabilities,
  ProviderPayment,
  ProviderRefund,
} from '../providers/types';
import {
  type BreakerDecision,
  type BreakerOutcome,
  type BreakerReport,
  type CircuitBreaker,
  breakerReport,
} from './breaker';
import { failureDetailsOf, toActivityFailure } from './classify';
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
  /** Retry presets to fall back on when Temporal does not tell the activity its retry policy. */
  readonly retry?: RetryOverrides;
  /** How far the provider's clock may lag ours when matching `created` against a lower bound. Default 60 s. */
  readonly clockSkewToleranceMs?: number;
}

/** The arguments every write carries: which provider, and the scope its idempotency key is derived from. */
export interface ScopedArgs {
  readonly provider: string;
  readonly merchantId: string;
  /** The order service's key of this intent (payment, capture or refund key). Never sent, never logged. */
  readonly key: string;
}

export interface CreatePaymentArgs extends ScopedArgs {
  readonly input: CreatePaymentInput;
  /**
   * Epoch ms: a payment created before this is not ours (used by the look-up-before-resend against a provider without
   * keys). Default: when this activity was first scheduled. Pass the workflow's first send time when a later
   * activity re-sends the same charge.
   */
  readonly notBeforeMs?: number;
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
export type CreatePaymentOutcome =
  | {
      readonly outcome: 'succeeded' | 'authorized';
      readonly payment: ProviderPayment;
      /** The provider replayed a stored answer for our key. */
      readonly replayed: boolean;
      /** Found by the look-up-before-resend (provider without keys): nothing was sent this attempt. */
      readonly recovered: boolean;
    }
  | { readonly outcome: 'declined'; readonly declineCode: string };

/** A refund's answer, with the payment as it stands after it (for the totals). */
export interface RefundOutcome {
  /** null when recovered: an earlier attempt's refund was found, not its refund object. */
  readonly refund: ProviderRefund | null;
  readonly payment: ProviderPayment;
  readonly recovered: boolean;
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
    scope: { readonly merchantId: string; readonly operation: ScopeOperation; readonly key: string } | undefined,
    body: (step: Step) => Promise<Outcome<T>>,
  ): Promise<T> => {
    const provider = providerNamed(providerName);
    const { info } = Context.current();
    const attempt = info.attempt;
    const safety = operationSafety(operation, provider.capabilities);
    const idempotencyKey =
      scope === undefined ? undefined : providerIdempotencyKey(scope.merchantId, scope.operation, scope.key);
    const hash = idempotencyKey === undefined ? undefined : keyHash(idempotencyKey);
    const log = deps.logger.child({ activity, provider: provider.name, attempt, ...(hash ? { keyHash: hash } : {}) });
    const started = now();
    const classify = (err: unknown) =>
      toActivityFailure(err, {
        operation,
        safety,
        provider: provider.name,
        attempt,
        spec: effectiveSpec(info, operation, provider.capabilities),
        elapsedMs: now() - info.scheduledTimestampMs,
        random,
      });

    // The breaker gates writes only: it exists to stop piling new, possibly-unknown effects onto a failing provider.
    // Reads are how a reconcile learns the truth; they go through (and still report their outcome to the breaker).
    const decision: BreakerDecision = safety === 'read' ? { allowed: true } : await acquire(provider.name, log);
    if (!decision.allowed) {
      const failure = classify(
        new CircuitOpenError({ operation, reason: 'breaker_open', retryAfterMs: decision.retryAfterMs }),
      );
      log.warn(
        { outcome: ErrorType.CircuitOpen, failure: failure.type, nextRetryDelay: failure.nextRetryDelay },
        'activity',
      );
      throw failure;
    }

    try {
      const result = await body({
        provider,
        attempt,
        safety,
        ...(idempotencyKey === undefined ? {} : { idempotencyKey }),
        ctx: {
          idempotencyKey: idempotencyKey ?? '',
          attempt,
          requestId: `req_${hash ?? activity}_${attempt}`,
        },
        scheduledAtMs: info.scheduledTimestampMs,
        mustLookBeforeResend: attempt > 1 && safety === 'non-idempotent-write',
      });
      await record(provider.name, 'success', breakerReport(safety, decision), log);
      log.info({ outcome: result.outcome, durationMs: now() - started }, 'activity');
      return result.value;
    } catch (err) {
      const details = failureDetailsOf(err, operation);
      await record(provider.name, details.type, breakerReport(safety, decision, details), log);
      const failure = classify(err);
      log.warn(
        {
          outcome: failureDetailsOf(err, operation).type,
          failure: failure.type,
          nonRetryable: failure.nonRetryable,
          nextRetryDelay: failure.nextRetryDelay,
          reason: isProviderError(err) ? err.details.reason : 'unexpected_error',
          durationMs: now() - started,
        },
        'activity',
      );
      throw failure;
    }
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

  const createdAfter = (p: ProviderPayment, notBeforeMs: number) => p.created * 1000 >= notBeforeMs - skewMs;
  // Metadata we sent (merchant id, payment key) and the provider echoes tells our payment from another of the same order.
  const sameMetadata = (p: ProviderPayment, sent: Readonly<Record<string, string>> | undefined) =>
    sent === undefined || p.metadata === undefined || Object.entries(sent).every(([k, v]) => p.metadata?.[k] === v);

  return {
    /** The provider's capability flags (a local activity: the workflow derives its retry policies from them). */
    async describeProvider(provider: string): Promise<ProviderCapabilities> {
      const { capabilities } = providerNamed(provider);
      return { ...capabilities };
    },

    /** Creates (authorizes, or authorizes and captures) a payment under the key derived from the charge's scope. */
    async createPayment(args: CreatePaymentArgs): Promise<CreatePaymentOutcome> {
      const scope = { merchantId: args.merchantId, operation: 'create' as const, key: args.key };
      return execute<CreatePaymentOutcome>('createPayment', 'create', args.provider, scope, async (step) => {
        if (step.mustLookBeforeResend) {
          const notBeforeMs = args.notBeforeMs ?? step.scheduledAtMs;
          const candidates = await lookupBeforeResend('create', async () => {
            const { capabilities } = step.provider;
            if (capabilities.lookupByKey && step.idempotencyKey !== undefined) {
              const byKey = await step.provider.findByIdempotencyKey(step.idempotencyKey);
              return byKey ? [byKey] : [];
            }
            if (!capabilities.lookupByReference) throw unverifiable('create', 'no_lookup_to_verify_resend');
            const all = await step.provider.findByReference(args.input.reference);
            return all.filter(
              (p) =>
                p.amount === args.input.amount &&
                p.currency === args.input.currency &&
                createdAfter(p, notBeforeMs) &&
                sameMetadata(p, args.input.metadata),
            );
          });
          if (candidates.length > 1) throw unverifiable('create', 'ambiguous_lookup_before_resend');
          const found = candidates[0];
          if (found) {
            const outcome = found.status === 'succeeded' ? 'succeeded' : 'authorized';
            return { value: { outcome, payment: found, replayed: true, recovered: true }, outcome: 'recovered' };
          }
        }
        const result = await step.provider.createPayment(args.input, step.ctx);
        if (result.outcome === 'declined') {
          return { value: { outcome: 'declined', declineCode: result.declineCode }, outcome: 'declined' };
        }
        return { value: { ...result, recovered: false }, outcome: 'succeeded' };
      });
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
        // The refund is committed; if this read fails, the retry replays (keys) or recovers (look-up) it.
        const payment = await step.provider.getPayment(args.paymentId);
        if (!payment) throw unverifiable('refund', 'payment_missing_after_refund');
        return { value: { refund, payment, recovered: false }, outcome: 'succeeded' };
      });
    },

    /**
     * Looks a write up at the provider: by payment id when known, else by the derived key when the provider can, else
     * by reference (narrowed by `match`; the most recent when several remain). Null when nothing is there.
     */
    async lookupPayment(args: LookupPaymentArgs): Promise<ProviderPayment | null> {
      const scope = { merchantId: args.merchantId, operation: args.operation, key: args.key };
      return execute('lookupPayment', 'lookup', args.provider, scope, async (step) => {
        const found = await (async (): Promise<ProviderPayment | null> => {
          if (args.paymentId !== undefined) return step.provider.getPayment(args.paymentId);
          const { capabilities } = step.provider;
          // Providers index payments by the key that created them; captures and refunds are read by payment id.
          if (capabilities.lookupByKey && step.idempotencyKey !== undefined && args.operation === 'create') {
            return step.provider.findByIdempotencyKey(step.idempotencyKey);
          }
          if (!capabilities.lookupByReference) return null;
          const { match } = args;
          const candidates = (await step.provider.findByReference(args.reference)).filter(
            (p) =>
              match === undefined ||
              (p.amount === match.amount &&
                p.currency === match.currency &&
                (match.createdGteMs === undefined || createdAfter(p, match.createdGteMs))),
          );
          return candidates.reduce<ProviderPayment | null>(
            (latest, p) => (latest === null || p.created > latest.created ? p : latest),
            null,
          );
        })();
        return { value: found, outcome: found ? 'succeeded' : 'not_found' };
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

/** The activities' type, for `proxyActivities<Activities>` in workflows (type import only). */
export type Activities = ReturnType<typeof createActivities>;
