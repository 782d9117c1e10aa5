/**
 * One benchmark scenario: a fresh task queue, workers and API; a warm-up; N measured payments; then the money check
 * at the simulator (exactly one create effect per payment), a sample of histories, and memory before/after.
 */
import { type MoneyProblem, checkMoneyInvariant } from './money-invariant';
import {
  type HistorySummary,
  type PaymentHistoryStats,
  type TimelineEvent,
  evenSample,
  sampleHistories,
  summarizeHistories,
} from './history';
import {
  type Driver,
  type EagerUpdateWithStartProbe,
  type PaymentOutcome,
  apiDriver,
  directDriver,
  probeEagerUpdateWithStart,
  runLoad,
} from './load';
import { bareWorkflowId, startPeerStack } from './peers/stack';
import { type CpuUsage, type MemorySnapshot, cpuSnapshot, cpuUsage, memorySnapshot } from './resources';
import { forEachBounded } from './bounded';
import { type BenchInfra, type ScenarioStack, benchTimings, startScenarioStack } from './stack';
import { type DeliveryCost, deliveryCost } from './merchant-webhooks';
import { type LatencySummary, summarize } from './stats';
import {
  type WalletScenarioResult,
  type WalletSpec,
  checkScenarioWallets,
  fundWallets,
  walletPartOf,
} from './wallet-scenario';

/** What a scenario does. */
export interface ScenarioSpec {
  readonly id: string;
  readonly description: string;
  /**
   * `api`: HTTP -> PaymentsClient (update-with-start); `direct`: Temporal client start + submit update; the peers:
   * `bare-workflow` (HTTP -> `client.workflow.execute` of a one-activity workflow), `no-engine` (HTTP -> provider).
   */
  readonly path: 'api' | 'direct' | 'bare-workflow' | 'no-engine';
  /**
   * A refund window this short (ms) instead of production's 30 days: the payments close during the scenario, which
   * waits for them and samples their whole-life histories (and counts the CPU until they closed).
   */
  readonly refundWindowMs?: number;
  readonly requestEagerStart?: boolean;
  /** Share of provider creates hit by `commit_then_drop` (seeded). */
  readonly faultRate?: number;
  /** Also probe update-with-start with requestEagerStart (one extra payment). */
  readonly probeEagerUpdateWithStart?: boolean;
  /** One payment at a time (`serialPayments` of them): the unloaded latency, where per-hop savings show. */
  readonly serial?: boolean;
  /** Payments with a wallet part (API path only): the stack has the wallets' database and funded wallets. */
  readonly wallet?: WalletSpec;
}

/** Sizes and bounds shared by the scenarios of one run. */
export interface RunSettings {
  readonly payments: number;
  readonly concurrency: number;
  /** Payments of the serial (concurrency 1) scenarios. */
  readonly serialPayments: number;
  readonly warmup: number;
  readonly historySample: number;
  readonly seed: number;
}

/** The simulator's side of the money check. */
export interface SimulatorCheck {
  /** Create effects (charges that moved money) recorded for this scenario's merchant. */
  readonly createEffects: number;
  /** One per payment driven (warm-up and probe included). */
  readonly expectedEffects: number;
  /** References (order ids) with more than one create effect: double charges. */
  readonly doubleCharged: number;
  /** Payments the load drove that have no create effect. */
  readonly missing: number;
  readonly createRequests: number;
  readonly faultHits: number;
  readonly webhookDeliveries: number;
  readonly webhookNon2xx: number;
  /** Payments whose create effect is not their card part (the amount less the wallet part). */
  readonly wrongAmount: number;
  /** Payments the wallet covered whole that reached the provider anyway (any request with their reference). */
  readonly walletOnlySent: number;
}

export interface ScenarioResult {
  readonly id: string;
  readonly description: string;
  readonly payments: number;
  readonly concurrency: number;
  readonly warmup: number;
  readonly wallMs: number;
  readonly throughputPerS: number;
  /** Latency of the first answer to each measured payment. */
  readonly latencyMs: LatencySummary;
  /** Until a settled answer (same-key repeats after 202 included). */
  readonly settledMs: LatencySummary;
  /** The same, only payments whose create was hit by a fault (fault scenarios). */
  readonly settledFaultedMs?: LatencySummary;
  readonly settledCleanMs?: LatencySummary;
  readonly answers: {
    readonly byStatus: Record<string, number>;
    readonly non2xx: number;
    readonly accepted202: number;
  };
  readonly repeats: number;
  /** Unexpected answers (non-2xx, network errors, a status other than succeeded) over warm-up and measurement. */
  readonly errors: number;
  readonly errorSamples: readonly string[];
  readonly eager?: { readonly requested: number; readonly eagerlyStarted: number };
  readonly eagerUpdateWithStartProbe?: EagerUpdateWithStartProbe;
  readonly simulator: SimulatorCheck;
  /** Sampled after the answers (and webhooks): open payments, or closed ones with `wholeLife`. */
  readonly history: HistorySummary;
  readonly historyFaulted?: HistorySummary;
  /** The histories are the payments' whole life (they closed during the scenario). */
  readonly wholeLife: boolean;
  /** With `wholeLife`: CPU from the first measured payment until all of them closed, per payment. */
  readonly cpuWholeLife?: CpuUsage;
  /** One sampled payment's history as a timeline (and one faulted payment's), to see where the time goes. */
  readonly timelines: { readonly sample?: PaymentTimeline; readonly faulted?: PaymentTimeline };
  readonly memory: {
    readonly before: MemorySnapshot;
    readonly after: MemorySnapshot;
    /** RSS growth of this process per payment of the scenario (open payments stay in the workers' cache), KiB. */
    readonly rssGrowthKiBPerPayment: number;
  };
  /** CPU of the measured part (warm-up and history sampling excluded). */
  readonly cpu: CpuUsage;
  /** The measured batch on the monotonic clock of `--cpu-prof` profiles (µs): for bench/cpu-profile.ts. */
  readonly measuredWindowUs: { readonly startUs: number; readonly endUs: number };
  /** BENCH_MERCHANT_WEBHOOKS=1: what delivering the scenario's events to its merchant cost (API paths only). */
  readonly merchantWebhooks?: DeliveryCost;
  /** Wallet scenarios: the holds' timings and the wallets' money check. */
  readonly wallet?: WalletScenarioResult;
  /** Why the scenario failed the bench; empty: passed. */
  readonly failures: readonly string[];
}

/** One payment's history timeline beside what its caller saw. */
export interface PaymentTimeline {
  readonly workflowId: string;
  /** The caller's latency of the first answer, ms. */
  readonly callerMs: number | undefined;
  readonly events: readonly TimelineEvent[];
}

const timelineOf = (outcome: PaymentOutcome | undefined, events: readonly TimelineEvent[]): PaymentTimeline => ({
  workflowId: outcome?.workflowId ?? '',
  callerMs: outcome === undefined ? undefined : Math.round(outcome.firstMs * 10) / 10,
  events,
});

const RPC_TIMEOUT_MS = 10_000;

/** CLOCK_MONOTONIC in µs: the clock V8 stamps `--cpu-prof` samples with. */
const monotonicUs = (): number => Number(process.hrtime.bigint() / 1000n);

/** Runs one scenario on `infra`; `signal` aborts it (the run's deadline). */
export async function runScenario(
  infra: BenchInfra,
  spec: ScenarioSpec,
  runSettings: RunSettings,
  signal: AbortSignal,
  log: (line: string) => void,
): Promise<ScenarioResult> {
  const settings: RunSettings = spec.serial
    ? {
        ...runSettings,
        payments: runSettings.serialPayments,
        concurrency: 1,
        warmup: Math.min(runSettings.warmup, 5),
      }
    : runSettings;
  const before = memorySnapshot();
  const deliveriesBefore = infra.sim.webhookDeliveries().length;
  const timings =
    spec.refundWindowMs === undefined ? benchTimings : { ...benchTimings, refundWindowMs: spec.refundWindowMs };
  const stack: ScenarioStack =
    spec.path === 'bare-workflow' || spec.path === 'no-engine'
      ? await startPeerStack(infra, spec.path, spec.id)
      : await startScenarioStack(infra, spec.id, timings, { wallets: spec.wallet !== undefined });
  const closers: (() => Promise<void>)[] = [];
  try {
    let drive: Driver;
    const directTarget = {
      client: infra.nativeClient,
      taskQueue: stack.taskQueue,
      merchantId: stack.merchantId,
      timings,
      scenario: spec.id,
      requestEagerStart: spec.requestEagerStart ?? false,
      rpcTimeoutMs: RPC_TIMEOUT_MS,
    };
    if (spec.path !== 'direct') {
      const api = apiDriver(
        {
          url: stack.url,
          token: stack.token,
          merchantId: stack.merchantId,
          scenario: spec.id,
          ...(spec.path === 'bare-workflow' ? { workflowIdOf: bareWorkflowId } : {}),
          ...(spec.wallet ? { walletPartOf: walletPartOf(spec.wallet) } : {}),
        },
        settings.concurrency,
      );
      drive = api.drive;
      closers.push(api.close);
    } else {
      drive = directDriver(directTarget);
    }

    if (spec.wallet && spec.path !== 'api') throw new TypeError(`${spec.id}: wallet parts go through the API only`);
    const funded = spec.wallet ? await fundWallets(stack, spec.wallet) : new Map<string, number>();
    const warm = await runLoad(drive, settings.warmup, settings.concurrency, signal);
    if (spec.faultRate) {
      infra.sim.addFaults({
        rules: [{ match: { operation: 'create' }, fault: 'commit_then_drop', probability: spec.faultRate }],
        seed: settings.seed,
      });
    }
    log(`  ${spec.id}: ${settings.warmup} warm-up payments done; measuring ${settings.payments}...`);
    const cpuBefore = cpuSnapshot();
    const startUs = monotonicUs();
    // The ledger transaction each first answer waits for: a split payment's hold (the workers'), a wallet-only
    // payment's debit (the API's); and the workers' debits of wallet-only payments, which read the API's back.
    const ledgerLists = [stack.apiWalletLedger?.debitMs, stack.walletLedger?.holdMs, stack.walletLedger?.debitMs];
    const ledgerBefore = ledgerLists.map((t) => t?.length ?? 0);
    const measured = await runLoad(drive, settings.payments, settings.concurrency, signal, settings.warmup);
    const [apiDebitMs = [], workerHoldMs = [], workerDebitMs = []] = ledgerLists.map(
      (t, i) => t?.slice(ledgerBefore[i]) ?? [],
    );
    const ledgerMs = { answerMs: [...apiDebitMs, ...workerHoldMs], workerDebitMs };
    const cpu = cpuUsage(cpuBefore, cpuSnapshot(), measured.outcomes.length);
    const measuredWindowUs = { startUs, endUs: monotonicUs() };
    const wholeLife = spec.refundWindowMs !== undefined;
    let cpuWholeLife: CpuUsage | undefined;
    let stillOpen = 0;
    if (wholeLife) {
      // Every payment of the scenario (warm-up too) closes once its refund window passed: wait for all, bounded.
      stillOpen = await waitClosed(
        infra,
        [...warm.outcomes, ...measured.outcomes].map((o) => o.workflowId),
        (spec.refundWindowMs ?? 0) + 30_000,
      );
      cpuWholeLife = cpuUsage(cpuBefore, cpuSnapshot(), measured.outcomes.length);
    }
    const faultHits = infra.sim.faults().reduce((sum, r) => sum + r.hits, 0);
    infra.sim.clearFaults();

    let probe: EagerUpdateWithStartProbe | undefined;
    if (spec.probeEagerUpdateWithStart && !signal.aborted) {
      probe = await probeEagerUpdateWithStart(directTarget, settings.warmup + settings.payments);
    }

    // Webhooks (payment.succeeded -> API -> signal) are part of each payment's cost: let them land first.
    await withTimeout(infra.sim.flushWebhooks(), 20_000, 'webhook flush');
    const all = [...warm.outcomes, ...measured.outcomes];
    const simulator = checkSimulator(infra, stack.apiKey, all, probe, faultHits, deliveriesBefore);
    // A payment the wallet covered whole has nothing at the provider: the wallets' check below is its money check.
    const money =
      spec.path === 'bare-workflow' || spec.path === 'no-engine'
        ? []
        : moneyProblems(
            infra,
            stack,
            all.filter((o) => cardPart(o) > 0),
          );
    const wallet =
      spec.wallet && infra.wallets
        ? await checkScenarioWallets(infra.wallets, stack, spec.wallet, all, funded, ledgerMs)
        : undefined;

    const ledger = infra.sim.ledger(stack.apiKey);
    const faultedRefs = new Set(
      ledger.requests.filter((r) => r.fault === 'commit_then_drop' && r.reference).map((r) => r.reference as string),
    );
    const faulted = measured.outcomes.filter((o) => faultedRefs.has(o.orderId));
    const clean = measured.outcomes.filter((o) => !faultedRefs.has(o.orderId));

    const sampled = evenSample(measured.outcomes, settings.historySample);
    // No engine, no history: its row shows zeros.
    const history =
      spec.path === 'no-engine'
        ? { stats: [noHistory], firstTimeline: undefined }
        : await sampleHistories(
            infra.nativeClient,
            sampled.map((o) => o.workflowId),
          );
    const faultedSampled = evenSample(faulted, settings.historySample);
    let faultedHistory: Awaited<ReturnType<typeof sampleHistories>> | undefined;
    if (faulted.length > 0) {
      faultedHistory = await sampleHistories(
        infra.nativeClient,
        faultedSampled.map((o) => o.workflowId),
      );
    }

    const delivery =
      infra.merchantWebhooks && spec.path === 'api'
        ? await deliveryCost(infra.nativeClient, infra.merchantWebhooks, stack.merchantId, all.length)
        : undefined;
    const errorOutcomes = all.filter((o) => o.errors.length > 0);
    const byStatus: Record<string, number> = {};
    for (const o of measured.outcomes) byStatus[o.firstAnswer] = (byStatus[o.firstAnswer] ?? 0) + 1;
    const non2xx = measured.outcomes.filter((o) => /^[013-9]\d\d$|^network$/.test(o.firstAnswer)).length;
    const eagerOutcomes = measured.outcomes.filter((o) => o.eagerlyStarted !== undefined);

    const failures: string[] = [];
    if (signal.aborted) failures.push('the run deadline aborted this scenario');
    if (measured.outcomes.length !== settings.payments) {
      failures.push(`only ${measured.outcomes.length} of ${settings.payments} payments ran`);
    }
    if (simulator.doubleCharged > 0)
      failures.push(`DOUBLE CHARGE: ${simulator.doubleCharged} references charged twice`);
    if (simulator.createEffects !== simulator.expectedEffects) {
      failures.push(`simulator create effects ${simulator.createEffects} != payments ${simulator.expectedEffects}`);
    }
    if (simulator.missing > 0) failures.push(`${simulator.missing} payments have no create effect`);
    if (simulator.wrongAmount > 0) {
      failures.push(`${simulator.wrongAmount} payments' create effect is not their card part`);
    }
    if (simulator.walletOnlySent > 0) {
      failures.push(`${simulator.walletOnlySent} payments the wallet covered whole reached the provider`);
    }
    if (wallet && !wallet.settled) failures.push('wallet holds were not all settled within 30 s of the answers');
    if (wallet && wallet.problems.length > 0) {
      failures.push(`wallets: ${wallet.problems.length} problem(s), first: ${wallet.problems[0]}`);
    }
    if (money.length > 0)
      failures.push(`money invariant: ${money.length} problem(s), first: ${money[0]?.kind} ${money[0]?.message}`);
    if (errorOutcomes.length > 0) failures.push(`${errorOutcomes.length} payments had unexpected answers`);
    if (stillOpen > 0) failures.push(`${stillOpen} payments were still open after their refund window`);
    if (delivery && delivery.delivered < delivery.events) {
      failures.push(`${delivery.events - delivery.delivered} merchant webhook events were not delivered`);
    }
    if (simulator.webhookNon2xx > 0) failures.push(`${simulator.webhookNon2xx} webhook deliveries were not 2xx`);
    if (spec.requestEagerStart && eagerOutcomes.every((o) => !o.eagerlyStarted)) {
      failures.push('requestEagerStart was set but no workflow started eagerly');
    }

    const after = memorySnapshot();
    return {
      id: spec.id,
      description: spec.description,
      payments: settings.payments,
      concurrency: settings.concurrency,
      warmup: settings.warmup,
      wallMs: Math.round(measured.wallMs),
      throughputPerS: Math.round((measured.outcomes.length / (measured.wallMs / 1000)) * 10) / 10,
      latencyMs: summarize(measured.outcomes.map((o) => o.firstMs)),
      settledMs: summarize(measured.outcomes.map((o) => o.settledMs)),
      ...(spec.faultRate
        ? {
            settledFaultedMs: summarize(faulted.map((o) => o.settledMs)),
            settledCleanMs: summarize(clean.map((o) => o.settledMs)),
          }
        : {}),
      answers: { byStatus, non2xx, accepted202: byStatus['202'] ?? 0 },
      repeats: measured.outcomes.reduce((sum, o) => sum + o.repeats, 0),
      errors: errorOutcomes.length,
      errorSamples: errorOutcomes.flatMap((o) => o.errors).slice(0, 5),
      ...(eagerOutcomes.length > 0
        ? {
            eager: {
              requested: eagerOutcomes.length,
              eagerlyStarted: eagerOutcomes.filter((o) => o.eagerlyStarted).length,
            },
          }
        : {}),
      ...(probe ? { eagerUpdateWithStartProbe: probe } : {}),
      simulator,
      history: summarizeHistories(history.stats),
      wholeLife,
      ...(cpuWholeLife ? { cpuWholeLife } : {}),
      ...(faultedHistory ? { historyFaulted: summarizeHistories(faultedHistory.stats) } : {}),
      timelines: {
        ...(history.firstTimeline ? { sample: timelineOf(sampled[0], history.firstTimeline) } : {}),
        ...(faultedHistory?.firstTimeline
          ? { faulted: timelineOf(faultedSampled[0], faultedHistory.firstTimeline) }
          : {}),
      },
      memory: {
        before,
        after,
        rssGrowthKiBPerPayment: Math.round(((after.rssMiB - before.rssMiB) * 1024) / Math.max(1, all.length)),
      },
      cpu,
      measuredWindowUs,
      ...(delivery ? { merchantWebhooks: delivery } : {}),
      ...(wallet ? { wallet } : {}),
      failures,
    };
  } finally {
    for (const close of closers) await close();
    await stack.close();
  }
}

/** What a payment without an engine costs in Temporal: nothing. */
const noHistory: PaymentHistoryStats = {
  events: 0,
  workflowTasks: 0,
  activities: 0,
  activityAttempts: 0,
  localActivities: 0,
  timers: 0,
  signals: 0,
  updates: 0,
  searchAttributeUpserts: 0,
  childWorkflows: 0,
  actions: 0,
  firstWorkflowTaskScheduleToStartMs: undefined,
  activityScheduleToStartMs: undefined,
  activityStartToCloseMs: undefined,
  startToActivityCompletedMs: undefined,
  workflowTaskRunMs: undefined,
  startToAnswerMs: undefined,
};

/** Waits until every workflow closed (any outcome), four at a time, within `timeoutMs`; answers how many did not. */
async function waitClosed(infra: BenchInfra, workflowIds: readonly string[], timeoutMs: number): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  let open = 0;
  await forEachBounded(workflowIds, 4, async (id) => {
    try {
      await infra.nativeClient.connection.withDeadline(deadline, () =>
        infra.nativeClient.workflow.getHandle(id).result(),
      );
    } catch {
      // A failed or terminated payment closed too; past the deadline it did not.
      if (Date.now() >= deadline) open += 1;
    }
  });
  return open;
}

/**
 * The money invariant every ledger harness holds (bench/money-invariant.ts), over the payments' last answers: the
 * product's paths only (the peers send keys of their own).
 */
function moneyProblems(
  infra: BenchInfra,
  stack: Pick<ScenarioStack, 'apiKey' | 'merchantId'>,
  outcomes: readonly PaymentOutcome[],
): MoneyProblem[] {
  return checkMoneyInvariant({
    payments: outcomes.map((o) => ({ merchantId: stack.merchantId, key: o.key, capture: 'automatic' })),
    answers: outcomes.flatMap((o) =>
      o.finalStatus === undefined
        ? []
        : [
            {
              merchantId: stack.merchantId,
              paymentKey: o.key,
              kind: 'charge' as const,
              opKey: o.key,
              amount: undefined,
              status: 200,
              bodyStatus: o.finalStatus,
            },
          ],
    ),
    ledger: infra.sim.ledger(stack.apiKey),
  });
}

/** What the provider is charged for a payment: its amount less its wallet part. */
const cardPart = (o: PaymentOutcome): number => o.amount - (o.wallet?.amount ?? 0);

/**
 * Exactly one create effect per payment driven with a card part, of that card part, and none twice for one reference;
 * nothing at all at the provider for a payment the wallet covered whole.
 */
function checkSimulator(
  infra: BenchInfra,
  apiKey: string,
  outcomes: readonly PaymentOutcome[],
  probe: EagerUpdateWithStartProbe | undefined,
  faultHits: number,
  deliveriesBefore: number,
): SimulatorCheck {
  const ledger = infra.sim.ledger(apiKey);
  const creates = ledger.effects.filter((e) => e.operation === 'create');
  const perReference = new Map<string, number>();
  for (const e of creates) perReference.set(e.reference, (perReference.get(e.reference) ?? 0) + 1);
  const carded = outcomes.filter((o) => cardPart(o) > 0);
  const sent = new Set(ledger.requests.map((r) => r.reference));
  // The simulator keeps one delivery log for the run; scenarios run one at a time, each flushed before the next.
  const deliveries = infra.sim.webhookDeliveries().slice(deliveriesBefore);
  return {
    createEffects: creates.length,
    expectedEffects: carded.length + (probe?.accepted ? 1 : 0),
    doubleCharged: [...perReference.values()].filter((n) => n > 1).length,
    missing: carded.filter((o) => !perReference.has(o.orderId)).length,
    wrongAmount: carded.filter((o) => creates.some((e) => e.reference === o.orderId && e.amount !== cardPart(o)))
      .length,
    walletOnlySent: outcomes.filter((o) => cardPart(o) === 0 && sent.has(o.orderId)).length,
    createRequests: ledger.requests.filter((r) => r.operation === 'create').length,
    faultHits,
    webhookDeliveries: deliveries.length,
    webhookNon2xx: deliveries.filter((d) => d.status === null || d.status < 200 || d.status > 299).length,
  };
}

async function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      promise,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`${what} took over ${ms} ms`)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}
