/**
 * The real side of the money model: the API harness (API + simulator + workers on the run's dev server) with short
 * real timings, and the simulator's control and provider endpoints over HTTP.
 */
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { providerIdempotencyKey } from '../../src/activities/keys';
import type { ScopeOperation } from '../../src/domain/ids';
import type { RetryOverrides } from '../../src/domain/retry';
import type { PaymentTimings } from '../../src/domain/workflow-inputs';
import { type ApiHarness, type ApiResponse, type TestMerchant, WEBHOOK_SECRET, startApiHarness } from '../api/harness';

/**
 * Short real timings: a reconcile checks after 1, 2.5 and 4.5 s and resubmits after the 1.5 s settle window, so an
 * unknown outcome settles (found or `needs_review`) within seconds. Authorization expiry and the refund window stay
 * long: payments stay open for captures and refunds for the whole sequence.
 */
export const modelTimings: PaymentTimings = {
  submitWaitMs: 4_000,
  reconcileScheduleMs: [1_000, 1_500, 2_000],
  settleWindowMs: 1_500,
  authorizationExpiryMs: 600_000,
  refundWindowMs: 600_000,
  unknownSweepThresholdMs: 3_600_000,
};

/** Two attempts per write within seconds; the HTTP client's total timeout (1.5 s in the harness) bounds each call. */
const shortWrite = {
  initialIntervalMs: 200,
  maximumIntervalMs: 500,
  attemptTimeoutMs: 2_500,
  budgetMs: 6_000,
  maximumAttempts: 2,
} as const;

/** Short retry budgets for every operation, so a fault that outlives them turns into a reconcile in seconds. */
export const modelRetry: RetryOverrides = {
  create: shortWrite,
  capture: shortWrite,
  refund: shortWrite,
  void: shortWrite,
  // One look-up attempt may read several pages (8.5 s at the harness's 1.5 s per call): a shorter attempt timeout is
  // raised to that, and a budget below it would be refused.
  lookup: { initialIntervalMs: 200, maximumIntervalMs: 500, attemptTimeoutMs: 8_500, budgetMs: 10_000 },
};

export type MerchantName = 'a' | 'b';

/** A provider payment as the simulator answers `GET /v1/payments/:id`. */
export interface SimPayment {
  readonly id: string;
  readonly status: 'authorized' | 'succeeded' | 'voided';
  readonly amount: number;
  readonly amount_captured: number;
  readonly amount_refunded: number;
  readonly currency: string;
  readonly reference: string;
  readonly metadata?: Record<string, string>;
}

/** One committed provider effect (`GET /_sim/ledger`). */
export interface SimEffect {
  readonly api_key: string;
  readonly operation: 'create' | 'capture' | 'void' | 'refund';
  readonly idempotency_key: string | null;
  readonly reference: string;
  readonly payment_id: string;
  readonly amount: number;
}

/** A simulator fault rule (`POST /_sim/faults`). */
export interface FaultRule {
  readonly match: { operation?: 'create' | 'capture' | 'void' | 'refund' | 'lookup'; reference?: string };
  readonly fault: 'commit_then_drop' | 'reset_before_commit' | 'latency' | 'status';
  readonly status?: number;
  readonly retry_after_s?: number;
  readonly latency_ms?: number;
  readonly times?: number;
}

/** The bench the commands drive. */
export interface World {
  readonly h: ApiHarness;
  merchant(name: MerchantName): TestMerchant;
  /** The provider key the workers send for (merchant, operation, key): how the ledger names an intent. */
  providerKey(name: MerchantName, operation: ScopeOperation, key: string): string;
  api(
    method: string,
    path: string,
    opts: { merchant: MerchantName; key?: string; body?: unknown },
  ): Promise<ApiResponse>;
  /** `POST /v1/payments/:key/resolve?merchantId=` with the bench's operator token (`OPERATOR_TOKENS`). */
  operatorResolve(merchant: MerchantName, key: string, body: unknown): Promise<ApiResponse>;
  sim: {
    addFaults(rules: readonly FaultRule[]): Promise<void>;
    clearFaults(): Promise<void>;
    effects(): Promise<SimEffect[]>;
    flushWebhooks(): Promise<void>;
    /** `deliver: false`: the provider sends no webhooks at all. */
    setWebhooks(mode: { deliver: boolean; duplicate: boolean; reorder: boolean }): Promise<void>;
    payment(id: string): Promise<SimPayment | undefined>;
  };
  close(): Promise<void>;
}

async function simCall(url: string, init: RequestInit = {}): Promise<unknown> {
  const res = await fetch(url, init);
  const text = await res.text();
  if (!res.ok && res.status !== 404) throw new Error(`${init.method ?? 'GET'} ${url} answered ${res.status}: ${text}`);
  return res.status === 404 ? undefined : (JSON.parse(text) as unknown);
}

/** Starts the harness with the model's timings and wraps the simulator's HTTP endpoints. */
export async function startWorld(env: TestWorkflowEnvironment): Promise<World> {
  const h = await startApiHarness(env, { timings: modelTimings, retry: modelRetry });
  const merchants = { a: h.a, b: h.b };
  const json = { 'content-type': 'application/json' };
  return {
    h,
    merchant: (name) => merchants[name],
    providerKey: (name, operation, key) => providerIdempotencyKey(merchants[name].id, operation, key),
    api: (method, path, o) =>
      h.request(method, path, {
        token: merchants[o.merchant].token,
        ...(o.key === undefined ? {} : { key: o.key }),
        ...(o.body === undefined ? {} : { body: o.body }),
      }),
    operatorResolve: (merchant, key, body) =>
      h.request('POST', `/v1/payments/${encodeURIComponent(key)}/resolve?merchantId=${merchants[merchant].id}`, {
        token: h.operator.token,
        body,
      }),
    sim: {
      async addFaults(rules) {
        await simCall(`${h.sim.url}/_sim/faults`, { method: 'POST', headers: json, body: JSON.stringify({ rules }) });
      },
      async clearFaults() {
        await simCall(`${h.sim.url}/_sim/faults`, { method: 'DELETE' });
      },
      async effects() {
        const ledger = (await simCall(`${h.sim.url}/_sim/ledger?api_key=${encodeURIComponent(h.apiKey)}`)) as {
          effects: SimEffect[];
        };
        return ledger.effects;
      },
      async flushWebhooks() {
        await simCall(`${h.sim.url}/_sim/webhooks/flush`, { method: 'POST', headers: json, body: '{}' });
      },
      async setWebhooks({ deliver, duplicate, reorder }) {
        await simCall(`${h.sim.url}/_sim/merchants/${encodeURIComponent(h.apiKey)}`, {
          method: 'PUT',
          headers: json,
          body: JSON.stringify({
            idempotency: true,
            ...(deliver ? { webhook_url: `${h.url}/webhooks/simulator`, webhook_secret: WEBHOOK_SECRET } : {}),
            webhook_duplicate: duplicate,
            webhook_reorder: reorder,
          }),
        });
      },
      async payment(id) {
        return (await simCall(`${h.sim.url}/v1/payments/${encodeURIComponent(id)}`, {
          headers: { authorization: `Bearer ${h.apiKey}` },
        })) as SimPayment | undefined;
      },
    },
    close: () => h.close(),
  };
}
