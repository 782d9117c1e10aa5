import { ActivityFailure, ApplicationFailure, log, sleep, workflowInfo } from '@temporalio/workflow';
import type {
  CreatePaymentArgs,
  CreatePaymentOutcome,
  FirstCreateArgs,
  FirstCreateResult,
  WalletFirstStep,
  WorkerConfigDetail,
} from '../activities';
import type { WalletStepDetail } from '../activities/wallet-first-step';
import { ErrorType } from '../domain/errors';
import type { WorkerProviderConfig } from '../domain/provider-payment';
import { defaultLocalAttemptTimeoutMs } from '../domain/retry-policy';
import { activitySummary, formatWait } from '../domain/summaries';
import { describeWorkerProvider, firstCreateAttempt } from './activity-options';
import { attemptFailure, failureType, messageOf, sendsOf } from './failures';
import type { PaymentPort } from './payment-port';
import { ProviderBinding } from './provider-binding';

/** What the first create needs of the payment: the {@link PaymentPort}, and the binding it sets. */
export interface BindingPort extends PaymentPort {
  /** The holder's binding: set here from the worker's view the first step recorded. */
  binding: ProviderBinding | undefined;
  /** A split payment's wallet part, held and settled by the first step itself (patch `wallet-split-first-step`). */
  firstWallet?: FirstWalletStep | undefined;
}

/** A split payment's wallet part in its first step: what to hold, and how the step settled it once it answered. */
export interface FirstWalletStep {
  readonly hold: NonNullable<FirstCreateArgs['wallet']>;
  settled?: NonNullable<WalletFirstStep['settled']>;
}

/**
 * The first step did not hold the wallet part, so it sent nothing (`possiblySent` false: short funds, a refusal,
 * database trouble), or it ended without saying (`possiblySent`: cut off, its worker gone), and may have held and sent.
 * The payment's own hold decides (it reads back what the step did), then the create runs as without a wallet step.
 */
export class WalletNotHeld extends Error {
  constructor(readonly possiblySent: boolean) {
    super(possiblySent ? 'the first step ended without saying what it did' : 'the first step did not hold the wallet');
    this.name = 'WalletNotHeld';
  }
}

/** What an attempt that left no record may have done: sent, with an outcome nobody saw. */
const possiblySent = { everSent: true, everUnknown: true } as const;

/**
 * A shape-3 charge's first create: one local activity answers the worker's view of the provider (capabilities and
 * retry presets, recorded in its marker: the payment runs every later activity, its reconcile and its continuation
 * with them) and, against a provider that honours keys and has no limits of its own, makes the first attempt. That
 * attempt's value, decline or refusal is the charge's answer, exactly as an attempt 1 of the activity would be; any
 * other failure (not sent, unavailable, unknown, cut off at its bound) is just "attempt 1": the activity takes over
 * under the same key (derived from the scope), carrying what the local attempt may have sent, so a request that
 * reached the provider is answered by its stored answer, and only the activity's final failure is classified (one
 * code path: failover, never sent, unknown). The activity checks the recorded capabilities against its own worker's
 * adapter before it sends anything (a worker configured otherwise refuses: finally only while nothing may have been
 * sent). `unaccounted`: an earlier try of this first task may have sent an attempt that left no record: it is counted
 * and carried as sent with an unknown outcome, so no later refusal can make the create look never sent.
 */
export async function firstCreate(
  payment: BindingPort,
  args: CreatePaymentArgs,
  unaccounted: boolean,
): Promise<CreatePaymentOutcome> {
  const { localAttemptTimeoutMs } = payment.input.timings;
  const boundMs = localAttemptTimeoutMs ?? defaultLocalAttemptTimeoutMs;
  // The payment runs every later activity, its reconcile and its continuation with the worker's view.
  const bindAfterLocal = (config: WorkerProviderConfig) =>
    (payment.binding = ProviderBinding.afterLocalAttempt(payment.provider, config, localAttemptTimeoutMs));
  const lost = unaccounted ? { earlier: possiblySent } : {};
  const wallet = payment.firstWallet;
  // Counted once the step answered: a step that held nothing sent nothing, and the create runs again without it.
  const countLost = () => {
    if (unaccounted) payment.state.view.attempts += 1;
  };
  let first: FirstCreateResult;
  try {
    // Its activation's time: an attempt that starts much later is a run again after a dead worker (see the activity).
    first = await firstCreateAttempt(
      boundMs,
      payment.provider,
      wallet !== undefined,
    )({
      ...args,
      ...lost,
      boundMs,
      scheduledInTaskAtMs: Date.now(),
      taskTimeoutMs: workflowInfo().taskTimeoutMs,
      ...(wallet === undefined ? {} : { wallet: wallet.hold }),
    });
  } catch (err) {
    if (wallet !== undefined) {
      const step = walletStepOf(err);
      if (step?.held !== true) throw new WalletNotHeld(step === undefined);
      if (step.settled !== undefined) wallet.settled = step.settled;
    }
    countLost();
    const type = failureType(err);
    const detail = workerDetailOf(err);
    const recorded = detail?.workerConfig;
    // Run again after a worker died with it out: the dead worker's attempt may have been sent, and is counted once.
    if (detail?.rerunOfLost === true && !unaccounted) payment.state.view.attempts += 1;
    // A final answer: the local attempt's failure is the create's (nothing else runs against this provider).
    if (type === ErrorType.ProviderRejected || type === ErrorType.ValidationError) {
      if (recorded !== undefined) bindAfterLocal(recorded);
      throw err;
    }
    // Cut off by Temporal itself (a stuck worker): the worker's view is read again, one more local activity.
    const config = recorded ?? (await describeWorkerProvider(payment.provider));
    const { acts } = bindAfterLocal(config);
    const after = acts.createAfterLocal;
    // The only attempt the worker's retry policy allows: the local attempt's failure is the create's.
    if (after === undefined) throw err;
    const earlier = attemptRecordOf(err);
    // The delay attempt 1's classification chose (Retry-After, else full jitter): the next attempt waits it, as the
    // activity's own retry would. A failure recorded before it carried one: the provider's Retry-After only. A wait
    // longer than the create budget ends the create as the activity's would (its outcome then reconciled).
    const wait = detail?.retryDelayMs ?? retryAfterOf(err);
    if (wait !== undefined && wait > acts.createBudgetMs) throw err;
    if (wait !== undefined) {
      await sleep(wait, {
        summary: `wait ${formatWait(wait)} before ${activitySummary('create', payment.provider)} takes over from the local first attempt`,
      });
    }
    log.info('local first create attempt did not settle; the activity takes over with the same key', {
      reason: messageOf(err),
      ...earlier,
    });
    // The local attempt's requests are the create's first; the activity's are counted with its own answer.
    payment.state.view.attempts += sendsOf(err);
    return after({ ...args, earlier, expectCapabilities: config.capabilities });
  }
  if (first.attempt === 'wallet_not_held') throw new WalletNotHeld(false);
  if (wallet !== undefined && first.wallet?.settled !== undefined) wallet.settled = first.wallet.settled;
  countLost();
  if (first.rerunOfLost === true && !unaccounted) payment.state.view.attempts += 1;
  if (first.attempt === 'settled') {
    bindAfterLocal(first.config);
    return first.outcome;
  }
  // A provider without keys or with limits of its own: the create runs on its queue only, with the worker's presets.
  const { acts } = (payment.binding = ProviderBinding.of(payment.provider, first.config));
  log.info('no local first create attempt at this provider', { reason: first.reason });
  return acts.write.createPayment({ ...args, ...lost, expectCapabilities: first.config.capabilities });
}

/** What a split payment's first step did with its wallet part, as its failure carries it; undefined when it said nothing. */
function walletStepOf(err: unknown): WalletFirstStep | undefined {
  const step = (detailFound(err, (d) => d.walletStep !== undefined) as Partial<WalletStepDetail> | undefined)
    ?.walletStep;
  return typeof step?.held === 'boolean' ? step : undefined;
}

/** The first detail of a local first attempt's failure (read through its wrapper) that `is` picks, if any. */
function detailFound(err: unknown, is: (detail: Record<string, unknown>) => boolean): object | undefined {
  const failure = err instanceof ActivityFailure ? err.cause : err;
  if (!(failure instanceof ApplicationFailure)) return undefined;
  return (failure.details ?? []).find(
    (d): d is Record<string, unknown> => typeof d === 'object' && d !== null && is(d as Record<string, unknown>),
  );
}

/** The worker's view of the provider (and the chosen retry delay) a local first attempt's failure carries, if any. */
function workerDetailOf(err: unknown): WorkerConfigDetail | undefined {
  const found = detailFound(err, (d) => d.workerConfig !== undefined) as Partial<WorkerConfigDetail> | undefined;
  if (found?.workerConfig === undefined) return undefined;
  const { retryDelayMs } = found;
  return {
    workerConfig: found.workerConfig,
    ...(typeof retryDelayMs === 'number' && retryDelayMs > 0 ? { retryDelayMs } : {}),
    ...(found.rerunOfLost === true ? { rerunOfLost: true as const } : {}),
  };
}

/** What a local first attempt may have done, as its failure reports it; a timeout or anything unreadable: everything. */
function attemptRecordOf(err: unknown): NonNullable<CreatePaymentArgs['earlier']> {
  const failure = err instanceof ActivityFailure ? err.cause : err;
  const info =
    failure instanceof ApplicationFailure ? (failure.details?.[0] as Record<string, unknown> | undefined) : undefined;
  if (typeof info?.everSent === 'boolean' && typeof info.everUnknown === 'boolean') {
    return { everSent: info.everSent, everUnknown: info.everUnknown };
  }
  return { everSent: true, everUnknown: true };
}

/** The wait a provider asked for (429/503 with Retry-After) in answer to the local attempt, read through its wrapper. */
function retryAfterOf(err: unknown): number | undefined {
  const failure = attemptFailure(err);
  if (!(failure instanceof ApplicationFailure) || failure.type !== ErrorType.ProviderUnavailable) return undefined;
  const info = failure.details?.[0] as { retryAfterMs?: unknown } | undefined;
  return typeof info?.retryAfterMs === 'number' && info.retryAfterMs > 0 ? info.retryAfterMs : undefined;
}
