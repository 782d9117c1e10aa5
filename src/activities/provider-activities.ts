/**
 * The provider activities: charge (a create, or a shape-3 charge's local first attempt), capture, void, refund, look-up
 * and list, each a thin step over the attempt pipeline (./attempt/pipeline.ts) that only says what to call and how an
 * attempt on a retry recognises an earlier attempt's effect.
 */
import { Context } from '@temporalio/activity';
import {
  type Adoption,
  type ChargeFacts,
  type PaymentOwner,
  adoptCandidate,
  metadataVerdict,
} from '../domain/adoption';
import type { WorkerProviderConfig } from '../domain/provider-payment';
import { localFirstAttemptMs, type ProviderOperation } from '../domain/retry';
import { NotSentError, OutcomeUnknownError, isProviderError } from '../providers/errors';
import type { PaymentProvider, ProviderCapabilities, ProviderPayment } from '../providers/types';
import { ErrorType } from '../domain/errors';
import { type AttemptDeps, createAttemptPipeline } from './attempt/pipeline';
import { withWorkerConfig } from './attempt/worker-config';
import type {
  CapturePaymentArgs,
  CreatePaymentArgs,
  CreatePaymentOutcome,
  FirstCreateArgs,
  FirstCreateResult,
  FirstCreateSkipped,
  ListProviderPaymentsArgs,
  LookupPaymentArgs,
  RefundOutcome,
  RefundPaymentArgs,
  VoidPaymentArgs,
} from './contract';
import { LOCAL_RERUN_GAP_MS } from './contract';
import { type WalletFirstSteps, withWalletPart } from './wallet-first-step';

/** What the activities need: the pipeline's providers, breaker, logger, clock and presets, and two settings of their own. */
export interface ActivityDeps extends AttemptDeps {
  /**
   * Providers with limits of their own (fleet-wide rate, slots, see `ProviderLimits`): a charge's create reaches them
   * through their activity queue only, where the limits apply, never as a local first attempt.
   */
  readonly providersWithLimits?: readonly string[];
  /** How far the provider's clock may lag ours when matching `created` against a lower bound. Default 60 s. */
  readonly clockSkewToleranceMs?: number;
  /** The wallet steps a split payment's first step makes around its attempt (src/activities/wallet-first-step.ts). */
  readonly walletSteps?: WalletFirstSteps;
}

/** Builds the activities over injected providers, breaker, logger and clock (tests pass fakes, the worker the real ones). */
export const createActivities = (deps: ActivityDeps) => {
  const { providerNamed, execute } = createAttemptPipeline(deps);
  const skewMs = deps.clockSkewToleranceMs ?? 60_000;
  const now = deps.now ?? Date.now;

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
    return execute<CreatePaymentOutcome>({
      activity: 'createPayment',
      operation: 'create',
      provider: args.provider,
      scope: { merchantId: args.merchantId, operation: 'create', key: args.key, keyProvider: args.keyProvider },
      afterUnknown: args.afterUnknown === true,
      before: args.earlier,
      signal,
      expectCapabilities: args.expectCapabilities,
      call: async (step) => {
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
            const at = new Date().toISOString();
            const value = {
              outcome,
              payment: found,
              replayed: true,
              recovered: true,
              sends: step.sends(),
              at,
            } as const;
            return { value, outcome: 'recovered' };
          }
        }
        const result = await step.provider.createPayment(args.input, step.ctx);
        const at = new Date().toISOString();
        if (result.outcome === 'declined') {
          const value = { outcome: 'declined', declineCode: result.declineCode, sends: step.sends(), at } as const;
          return { value, outcome: 'declined' };
        }
        return { value: { ...result, recovered: false, sends: step.sends(), at }, outcome: 'succeeded' };
      },
    });
  };

  const limited = new Set(deps.providersWithLimits ?? []);
  const workerConfigOf = (provider: PaymentProvider): WorkerProviderConfig => ({
    capabilities: { ...provider.capabilities },
    retry: deps.retry ?? {},
  });

  const activities = {
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
      const { boundMs, scheduledInTaskAtMs, taskTimeoutMs, ...given } = args;
      // Run again after its worker died: what that worker may have sent is carried like an earlier attempt's.
      const rerunOfLost =
        scheduledInTaskAtMs !== undefined && now() - scheduledInTaskAtMs >= (taskTimeoutMs ?? LOCAL_RERUN_GAP_MS);
      const createArgs: CreatePaymentArgs = rerunOfLost
        ? { ...given, earlier: { everSent: true, everUnknown: true } }
        : given;
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
        const outcome = await create(createArgs, signal);
        return { config, ...(rerunOfLost ? { rerunOfLost: true as const } : {}), attempt: 'settled', outcome };
      } catch (err) {
        throw withWorkerConfig(err, config, rerunOfLost);
      }
    },

    /** This worker's view of a provider (capabilities, retry presets): a shape-3 charge whose first step lost it. */
    async describeWorkerProvider(provider: string): Promise<WorkerProviderConfig> {
      return workerConfigOf(providerNamed(provider));
    },

    /** Captures an authorized payment (all of it when `amount` is absent) under the capture's own key. */
    async capturePayment(args: CapturePaymentArgs): Promise<ProviderPayment> {
      const scope = { merchantId: args.merchantId, operation: 'capture' as const, key: args.key };
      return execute({
        activity: 'capturePayment',
        operation: 'capture',
        provider: args.provider,
        scope,
        afterUnknown: args.afterUnknown === true,
        call: async (step) => {
          if (step.mustLookBeforeResend) {
            const current = await lookupBeforeResend('capture', () => step.provider.getPayment(args.paymentId));
            const before = args.amountCapturedBefore ?? 0;
            if (current && current.amountCaptured >= before + (args.amount ?? current.amount - before)) {
              return { value: current, outcome: 'recovered' };
            }
          }
          const body = args.amount === undefined ? {} : { amount: args.amount };
          return { value: await step.provider.capturePayment(args.paymentId, body, step.ctx), outcome: 'succeeded' };
        },
      });
    },

    /** Voids (releases) an authorized payment. */
    async voidPayment(args: VoidPaymentArgs): Promise<ProviderPayment> {
      const scope = { merchantId: args.merchantId, operation: 'void' as const, key: args.key };
      return execute({
        activity: 'voidPayment',
        operation: 'void',
        provider: args.provider,
        scope,
        call: async (step) => {
          if (step.mustLookBeforeResend) {
            const current = await lookupBeforeResend('void', () => step.provider.getPayment(args.paymentId));
            if (current?.status === 'voided') return { value: current, outcome: 'recovered' };
          }
          return { value: await step.provider.voidPayment(args.paymentId, step.ctx), outcome: 'succeeded' };
        },
      });
    },

    /** Refunds `amount` of a captured payment under the refund's own key; answers the payment as it stands after. */
    async refundPayment(args: RefundPaymentArgs): Promise<RefundOutcome> {
      const scope = { merchantId: args.merchantId, operation: 'refund' as const, key: args.key };
      return execute<RefundOutcome>({
        activity: 'refundPayment',
        operation: 'refund',
        provider: args.provider,
        scope,
        afterUnknown: args.afterUnknown === true,
        call: async (step) => {
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
        },
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
        keyProvider: args.keyProvider,
      };
      const owner: PaymentOwner = { merchantId: args.merchantId, key: args.key };
      return execute({
        activity: 'lookupPayment',
        operation: 'lookup',
        provider: args.provider,
        scope,
        call: async (step) => {
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
        },
      });
    },

    /** One page of the provider's payments by creation time (for the unknown-payment sweep and audits). */
    async listProviderPayments(args: ListProviderPaymentsArgs): Promise<{ data: ProviderPayment[]; hasMore: boolean }> {
      return execute({
        activity: 'listProviderPayments',
        operation: 'list',
        provider: args.provider,
        call: async (step) => {
          const page = await step.provider.listPayments({
            ...(args.createdGte === undefined ? {} : { createdGte: args.createdGte }),
            ...(args.createdLt === undefined ? {} : { createdLt: args.createdLt }),
            ...(args.startingAfter === undefined ? {} : { startingAfter: args.startingAfter }),
            ...(args.limit === undefined ? {} : { limit: args.limit }),
          });
          return { value: { data: [...page.data], hasMore: page.hasMore }, outcome: 'succeeded' };
        },
      });
    },
  };
  // A split payment's first step holds its wallet part before the attempt and settles it after.
  return { ...activities, firstCreateAttempt: withWalletPart(activities.firstCreateAttempt, deps.walletSteps) };
};

/** The activities' type, for `proxyActivities<Activities>` in workflows (type import only). */
export type Activities = ReturnType<typeof createActivities>;
