/**
 * A payments test rig: the real simulator over HTTP, the real REST provider, and the real worker set-up
 * (src/stack.ts) on a fresh task queue, against whichever Temporal environment the test file chose.
 */
import { randomUUID } from 'node:crypto';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import pino from 'pino';
import { chargeWorkflowId } from '../../src/domain/ids';
import { chargeFingerprint } from '../../src/client/fingerprint';
import { ChargeRequest, type ChargeRequestInput } from '../../src/domain/payment';
import type { ChargeWorkflowInput, PaymentTimings } from '../../src/domain/workflow-inputs';
import type { RetryOverrides } from '../../src/domain/retry';
import { createProvider, simulatorCapabilities, simulatorCapabilitiesWithoutKeys } from '../../src/providers';
import type { RestProvider } from '../../src/providers/rest/adapter';
import { type RunningSimulator, startSimulator } from '../../src/simulator/server';
import type { CircuitBreaker } from '../../src/breaker';
import { startStack } from '../../src/stack';
import { workflowBundle } from './workflow-bundle';

export { workflowBundle };

/** Timings short enough for real-time tests; time-skipping tests may use production-like ones. */
export const fastTimings: PaymentTimings = {
  submitWaitMs: 2_000,
  reconcileScheduleMs: [30_000, 120_000, 600_000, 3_600_000, 21_600_000],
  settleWindowMs: 60_000,
  authorizationExpiryMs: 7 * 24 * 3_600_000,
  refundWindowMs: 30 * 24 * 3_600_000,
  unknownSweepThresholdMs: 8 * 3_600_000,
};

export interface RigOptions {
  /** Merchant without idempotency keys at the simulator (every POST a new effect). */
  readonly noKeys?: boolean;
  readonly keyTtlS?: number;
  readonly totalTimeoutMs?: number;
  /** The workers' circuit breaker (default: a fresh in-memory one). */
  readonly breaker?: CircuitBreaker;
  /** Register the reconcile sweep's activities with the workers, as the worker process does. */
  readonly sweep?: boolean;
  /** The longest Retry-After the adapter takes (`PROVIDER_MAX_RETRY_AFTER_MS`; default its own). */
  readonly maxRetryAfterMs?: number;
}

export interface Rig {
  readonly env: TestWorkflowEnvironment;
  readonly sim: RunningSimulator;
  readonly provider: RestProvider;
  readonly apiKey: string;
  readonly taskQueue: string;
  readonly merchantId: string;
  /** Runs `fn` while the workers poll; shuts them down afterwards. */
  run<T>(fn: () => Promise<T>): Promise<T>;
  /** A chargeWorkflow input for `request` under `key`. */
  input(
    request: ChargeRequestInput,
    opts?: { key?: string; timings?: Partial<PaymentTimings>; retry?: RetryOverrides },
  ): ChargeWorkflowInput;
  /** Remembers a workflow to terminate at close: a test's leftovers must not hold the next test's skipped time. */
  track(workflowId: string): void;
  /** Effects and requests the simulator recorded for this rig's merchant. */
  ledger(): ReturnType<RunningSimulator['ledger']>;
  close(): Promise<void>;
}

/** Starts a simulator, a provider pointed at it, and workers on a fresh task queue. */
export async function startRig(env: TestWorkflowEnvironment, opts: RigOptions = {}): Promise<Rig> {
  const sim = await startSimulator({ port: 0 });
  const apiKey = `sk_test_${randomUUID()}`;
  const keyTtlS = opts.keyTtlS ?? 86_400;
  await sim.setMerchant(apiKey, { idempotency: !opts.noKeys, key_ttl_s: keyTtlS });
  // A time-skipping server's clock runs ahead of the wall clock once a test skipped time; the provider's clock must
  // agree with workflow time, as it does in production, or "created after our first send" means nothing.
  const skew = Math.floor(((await env.currentTimeMs()) - Date.now()) / 1000);
  if (skew > 0) await sim.advanceClock(skew);
  const logger = pino({ level: process.env.TEST_LOG_LEVEL ?? 'silent' });
  const provider = createProvider({
    name: 'simulator',
    baseUrl: sim.url,
    apiKey,
    capabilities: opts.noKeys ? simulatorCapabilitiesWithoutKeys() : simulatorCapabilities(keyTtlS),
    connectTimeoutMs: 1_000,
    totalTimeoutMs: opts.totalTimeoutMs ?? 3_000,
    ...(opts.maxRetryAfterMs === undefined ? {} : { maxRetryAfterMs: opts.maxRetryAfterMs }),
    logger,
  });
  const taskQueue = `test-${randomUUID()}`;
  const merchantId = `m_${randomUUID().slice(0, 8)}`;
  const workflowBundleReady = await workflowBundle();
  const tracked = new Set<string>();

  return {
    env,
    sim,
    provider,
    apiKey,
    taskQueue,
    merchantId,
    async run(fn) {
      const stack = await startStack({
        logger,
        namespace: env.namespace ?? 'default',
        taskQueue,
        nativeConnection: env.nativeConnection,
        workers: {
          providers: { simulator: provider },
          workflows: { workflowBundle: workflowBundleReady },
          ...(opts.breaker === undefined ? {} : { breaker: opts.breaker }),
          ...(opts.sweep ? { sweep: true } : {}),
        },
      });
      try {
        return await fn();
      } finally {
        await stack.close();
      }
    },
    input(requestInput, o = {}) {
      const request = ChargeRequest.parse(requestInput);
      return {
        merchantId,
        key: o.key ?? `key_${randomUUID()}`,
        fingerprint: chargeFingerprint(request),
        request,
        timings: { ...fastTimings, ...o.timings },
        ...(o.retry ? { retry: o.retry } : {}),
      };
    },
    ledger: () => sim.ledger(apiKey),
    track: (workflowId) => void tracked.add(workflowId),
    async close() {
      await Promise.all(
        [...tracked].map((id) =>
          env.client.workflow
            .getHandle(id)
            .terminate('test finished')
            .catch(() => undefined),
        ),
      );
      await provider.close();
      await sim.close();
    },
  };
}

/** The workflow id of an input's payment. */
export const idOf = (input: ChargeWorkflowInput): string => chargeWorkflowId(input.merchantId, input.key);

/** A valid charge request; override any field. */
export const chargeRequest = (over: Partial<ChargeRequestInput> = {}): ChargeRequestInput => ({
  orderId: `order_${randomUUID()}`,
  amount: { value: 1_000, currency: 'EUR' },
  paymentMethod: 'pm_card_visa',
  ...over,
});
