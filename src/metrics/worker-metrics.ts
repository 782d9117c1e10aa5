/**
 * The worker's own metrics (prom-client): every provider call by provider, operation, outcome class and whether it
 * was the original attempt or a retry; the retry delays we chose; reconciles started and how they ended; the breaker's
 * state; failovers. Counted from outside the activities and workflows: an activity interceptor sees each attempt's
 * result or typed failure, workflow sinks report reconciles and failovers. The Temporal SDK's own metrics are a separate endpoint (Runtime
 * telemetry, see src/worker.ts).
 */
import { ApplicationFailure } from '@temporalio/common';
import { msToNumber } from '@temporalio/common/lib/time';
import type { Context } from '@temporalio/activity';
import type { ActivityInterceptorsFactory, InjectedSinks } from '@temporalio/worker';
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { BreakerObserver } from '../breaker';
import type { PaymentSinks } from '../domain/sinks';

/** The provider-call activities and the operation each performs. */
const providerCallActivities: Readonly<Record<string, string>> = {
  createPayment: 'create',
  capturePayment: 'capture',
  voidPayment: 'void',
  refundPayment: 'refund',
  lookupPayment: 'lookup',
  listProviderPayments: 'list',
  // A shape-3 charge's local first create attempt, on the workflow worker: attempt 1 of the create.
  firstCreateAttempt: 'create',
};

/** A breaker's state as the gauge reports it. */
export type BreakerStateName = 'closed' | 'open' | 'half_open';

/** The metric objects, registered on one registry. */
export interface WorkerMetrics {
  readonly registry: Registry;
  readonly providerCalls: Counter<'provider' | 'operation' | 'outcome' | 'attempt'>;
  readonly providerCallSeconds: Histogram<'provider' | 'operation' | 'outcome'>;
  readonly retryDelaySeconds: Histogram<'provider' | 'operation' | 'outcome'>;
  readonly reconcilesStarted: Counter<'provider' | 'operation'>;
  readonly reconcilesEnded: Counter<'provider' | 'operation' | 'outcome'>;
  readonly failovers: Counter<'from' | 'to' | 'reason'>;
}

/** Registers the worker's metrics on `registry`; `breakerState` (optional) feeds the breaker gauge on each scrape. */
export function createWorkerMetrics(
  registry: Registry,
  breakerState?: {
    readonly providers: readonly string[];
    /** May be async: a shared store (Redis) is read on each scrape. */
    state(provider: string): BreakerStateName | Promise<BreakerStateName>;
  },
): WorkerMetrics {
  const registers = [registry];
  const metrics: WorkerMetrics = {
    registry,
    providerCalls: new Counter({
      name: 'payments_provider_calls_total',
      help: 'Provider call attempts by provider, operation, outcome class (succeeded, declined, or the failure type) and attempt (original or retry)',
      labelNames: ['provider', 'operation', 'outcome', 'attempt'],
      registers,
    }),
    providerCallSeconds: new Histogram({
      name: 'payments_provider_call_duration_seconds',
      help: 'Duration of one provider call attempt (activity execution), by outcome class',
      labelNames: ['provider', 'operation', 'outcome'],
      buckets: [0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers,
    }),
    retryDelaySeconds: new Histogram({
      name: 'payments_provider_retry_delay_seconds',
      help: 'The delay chosen before the next attempt of a retryable failure (Retry-After, else full-jitter backoff)',
      labelNames: ['provider', 'operation', 'outcome'],
      buckets: [0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300],
      registers,
    }),
    reconcilesStarted: new Counter({
      name: 'payments_reconciles_started_total',
      help: 'Reconciles started for a write with an unknown outcome',
      labelNames: ['provider', 'operation'],
      registers,
    }),
    reconcilesEnded: new Counter({
      name: 'payments_reconciles_ended_total',
      help: 'Reconciles ended, by outcome: found, declined, rejected, needs_review',
      labelNames: ['provider', 'operation', 'outcome'],
      registers,
    }),
    failovers: new Counter({
      name: 'payments_failovers_total',
      help: 'Charges moved to the next provider of their list, by the provider left, the one moved to and why every send at the first provably never left (connect_refused, breaker_open, ...)',
      labelNames: ['from', 'to', 'reason'],
      registers,
    }),
  };
  if (breakerState) {
    new Gauge({
      name: 'payments_breaker_state',
      help: 'Circuit breaker state per provider: 1 for the current state, 0 for the others',
      labelNames: ['provider', 'state'],
      registers,
      async collect() {
        for (const provider of breakerState.providers) {
          const current = await breakerState.state(provider);
          for (const s of ['closed', 'open', 'half_open'] as const)
            this.set({ provider, state: s }, s === current ? 1 : 0);
        }
      },
    });
  }
  return metrics;
}

/** The outcome class of a provider call's answer: `declined` is an answer, not a failure. */
function outcomeOfResult(result: unknown): string {
  const outcome = (result as { outcome?: unknown } | null)?.outcome;
  return outcome === 'declined' ? 'declined' : 'succeeded';
}

/** Counts each provider-call attempt; other activities pass through untouched. */
export function providerCallInterceptor(metrics: WorkerMetrics): ActivityInterceptorsFactory {
  return (ctx: Context) => ({
    inbound: {
      async execute(input, next) {
        const { activityType, attempt } = ctx.info;
        const operation = providerCallActivities[activityType];
        if (operation === undefined) return next(input);
        const args = input.args[0] as { provider?: unknown; earlier?: unknown } | undefined;
        const provider = String(args?.provider ?? 'unknown');
        // The create after a local first attempt (`earlier` carries what it did) is that attempt's retry.
        const attemptKind =
          attempt > 1 || (activityType === 'createPayment' && args?.earlier !== undefined) ? 'retry' : 'original';
        const stop = metrics.providerCallSeconds.startTimer({ provider, operation });
        const count = (outcome: string) => {
          metrics.providerCalls.inc({ provider, operation, outcome, attempt: attemptKind });
          stop({ outcome });
        };
        try {
          const result = await next(input);
          // A local first attempt against a provider whose create runs on its queue only sent nothing: no call.
          if (activityType === 'firstCreateAttempt' && (result as { attempt?: unknown }).attempt !== 'settled') {
            return result;
          }
          count(
            outcomeOfResult(activityType === 'firstCreateAttempt' ? (result as { outcome?: unknown }).outcome : result),
          );
          return result;
        } catch (err) {
          const outcome = err instanceof ApplicationFailure ? (err.type ?? 'ApplicationFailure') : 'error';
          count(outcome);
          if (err instanceof ApplicationFailure && !err.nonRetryable && err.nextRetryDelay != null) {
            metrics.retryDelaySeconds.observe({ provider, operation, outcome }, msToNumber(err.nextRetryDelay) / 1000);
          }
          throw err;
        }
      },
    },
  });
}

/**
 * The workflow sinks that feed the reconcile and failover counters. Never called during replay (`callDuringReplay:
 * false`, said outright): a worker that picks up a payment's history again (cache eviction, restart) counts nothing
 * twice.
 */
export function paymentSinks(metrics: WorkerMetrics): InjectedSinks<PaymentSinks> {
  return {
    paymentMetrics: {
      reconcile: {
        fn(_info, { event, operation, provider }) {
          if (event === 'started') metrics.reconcilesStarted.inc({ provider, operation });
          else metrics.reconcilesEnded.inc({ provider, operation, outcome: event });
        },
        callDuringReplay: false,
      },
      failover: {
        fn(_info, { from, to, reason }) {
          metrics.failovers.inc({ from, to, reason });
        },
        callDuringReplay: false,
      },
    },
  };
}

/**
 * Counts what the circuit breaker does, as its observer: transitions by the state entered, probes by result,
 * provider-wide cool-downs, refused writes by reason, and the store it answers from (shared Redis or in-process).
 * With the shared store each event is reported by the one process that caused it, so a fleet-wide sum counts it once.
 */
export function breakerMetricsObserver(registry: Registry): BreakerObserver {
  const registers = [registry];
  const transitions = new Counter({
    name: 'payments_breaker_transitions_total',
    help: 'Circuit breaker transitions by provider and the state entered (open, half_open, closed)',
    labelNames: ['provider', 'to'],
    registers,
  });
  const probes = new Counter({
    name: 'payments_breaker_probes_total',
    help: 'Half-open probes by provider and result (sent, succeeded, failed, released: its write never left)',
    labelNames: ['provider', 'result'],
    registers,
  });
  const coolDowns = new Counter({
    name: 'payments_breaker_cool_downs_total',
    help: 'Provider-wide cool-downs set by a 429/503 with Retry-After',
    labelNames: ['provider'],
    registers,
  });
  const refusals = new Counter({
    name: 'payments_breaker_refusals_total',
    help: 'Writes refused before they were sent, by provider and reason (open, probe_in_flight, cool_down)',
    labelNames: ['provider', 'reason'],
    registers,
  });
  const store = new Gauge({
    name: 'payments_breaker_shared_store',
    help: '1 while the breaker answers from the shared (Redis) store, 0 while from the in-process fallback',
    registers,
  });
  return {
    onTransition: (e) => transitions.inc({ provider: e.provider, to: e.to }),
    onProbe: (e) => probes.inc({ provider: e.provider, result: e.result }),
    onCoolDown: (e) => coolDowns.inc({ provider: e.provider }),
    onRefusal: (e) => refusals.inc({ provider: e.provider, reason: e.reason }),
    onStoreChange: (e) => store.set(e.store === 'shared' ? 1 : 0),
  };
}
