/**
 * The real side of the money model: the test world with the API (API + simulator on the run's dev server) with short real timings,
 * its workers in two child processes (test/model/fleet.ts) that reach the simulator through a proxy the model can take
 * off the network and share one breaker through a redis-server, the simulator's control and provider endpoints over
 * HTTP, and a PostgreSQL database of the wallet ledger (the API and both workers use it, as DATABASE_URL gives it).
 */
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import type pg from 'pg';
import { providerIdempotencyKey } from '../../src/activities/keys';
import { closeBreakerRedis, connectBreakerRedis } from '../../src/breaker/redis';
import type { ScopeOperation } from '../../src/domain/ids';
import type { RetryOverrides } from '../../src/domain/retry';
import type { PaymentTimings } from '../../src/domain/workflow-inputs';
import type { LedgerRequest } from '../../src/simulator/server';
import { KeyRecords } from '../../src/key-records';
import { OrderClaims } from '../../src/db';
import { MerchantEventOutbox, WebhookEndpoints, defaultMerchantWebhookSettings } from '../../src/merchant-webhooks';
import { WalletLedger } from '../../src/wallets';
import { startRedisServer } from '../../scripts/lib/redis-server';
import {
  type ApiWorld,
  type ApiResponse,
  type TestMerchant,
  WEBHOOK_SECRET,
  startWorld as startTestWorld,
} from '../helpers/world';
import { openTestDatabase } from '../helpers/database';
import { workflowBundlePath } from '../helpers/workflow-bundle';
import { type Fleet, type WorkerProfile, startFleet } from './fleet';
import { type ProviderProxy, startProviderProxy } from './provider-proxy';
import { removeFaultRules } from './faults';

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
  // A customer who never acts: the payment is cancelled and declined within seconds (look-ups at 1, 2.5, 4.5 s).
  customerActionTimeoutMs: 6_000,
};

/** Two attempts per write within seconds; the HTTP client's total timeout (1.4-1.5 s, fleet.ts) bounds each call. */
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
  // One look-up attempt may read several pages (8.5 s at 1.5 s per call): a shorter attempt timeout is
  // raised to that, and a budget below it would be refused.
  lookup: { initialIntervalMs: 200, maximumIntervalMs: 500, attemptTimeoutMs: 8_500, budgetMs: 10_000 },
};

export type MerchantName = 'a' | 'b';

/** A provider payment as the simulator answers `GET /v1/payments/:id`. */
export interface SimPayment {
  readonly id: string;
  readonly status: 'requires_action' | 'authorized' | 'succeeded' | 'voided' | 'failed';
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

/** How the provider is down during an outage: connections refused (nothing leaves), or 503 to every request. */
export type OutageKind = 'refused' | 'unavailable';

/** A simulator fault rule (`POST /_sim/faults`). */
export interface FaultRule {
  readonly match: { operation?: 'create' | 'capture' | 'void' | 'refund' | 'lookup'; reference?: string };
  readonly fault: 'commit_then_drop' | 'reset_before_commit' | 'latency' | 'status';
  readonly status?: number;
  readonly retry_after_s?: number;
  readonly latency_ms?: number;
  readonly times?: number;
}

/** The world the commands drive. */
export interface World {
  readonly h: ApiWorld;
  /** The worker processes (rolling deploys, crashes). */
  readonly fleet: Fleet;
  /** The wallet ledger's database (the API's and both workers'), for the checks to read its tables. */
  readonly db: pg.Pool;
  /** Takes the provider down for `ms` (every operation, lookups too), then brings it back on its own. */
  outage(kind: OutageKind, ms: number): Promise<void>;
  /**
   * A clean slate for a sequence: the provider back, no faults, a closed breaker, every worker alive with `fleet`'s
   * profiles (default all A; `['A', 'B']`: a rolling deploy half done).
   */
  reset(fleet?: readonly WorkerProfile[]): Promise<void>;
  merchant(name: MerchantName): TestMerchant;
  /** The provider key the workers send for (merchant, operation, key): how the ledger names an intent. */
  providerKey(name: MerchantName, operation: ScopeOperation, key: string): string;
  api(
    method: string,
    path: string,
    /** `second`: through the world's second API (its own client, the same order claims), not the first. */
    opts: { merchant: MerchantName; key?: string; body?: unknown; second?: boolean },
  ): Promise<ApiResponse>;
  /** `POST /v1/payments/:key/resolve?merchantId=` with the world's operator token (`OPERATOR_TOKENS`). */
  operatorResolve(merchant: MerchantName, key: string, body: unknown): Promise<ApiResponse>;
  sim: {
    addFaults(rules: readonly FaultRule[]): Promise<void>;
    /** Takes rules `addFaults` armed off again (what they have left), every other rule kept. */
    removeFaults(rules: readonly FaultRule[]): Promise<void>;
    clearFaults(): Promise<void>;
    effects(): Promise<SimEffect[]>;
    /** Every request the provider received (the simulator records each before any fault). */
    requests(): Promise<LedgerRequest[]>;
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

/** Starts the test world with the model's timings (no workers of its own), the worker processes behind the proxy, Redis. */
export async function startWorld(env: TestWorkflowEnvironment): Promise<World> {
  // A database of its own for the wallets: the API's routes and both worker processes' wallet activities use it.
  const db = await openTestDatabase();
  const closers: (() => Promise<void>)[] = [() => db.drop()];
  const close = async () => {
    for (const c of closers.splice(0).reverse()) await c().catch(() => undefined);
  };
  try {
    const h = await startTestWorld(env, {
      api: true,
      timings: modelTimings,
      retry: modelRetry,
      workers: false,
      wallets: new WalletLedger(db.pool),
      // As `npm start` and the cluster: payments announce their events (the model's merchants have no endpoint: each
      // is answered `no_endpoint`) and hand their key answers to the table, one activity a task, on the fleet.
      merchantWebhooks: {
        outbox: new MerchantEventOutbox(db.pool),
        endpoints: new WebhookEndpoints(db.pool),
        settings: defaultMerchantWebhookSettings,
      },
      keyRecords: new KeyRecords(db.pool),
      // As the API processes of `npm start` and the cluster: one open payment per order across them.
      orderClaims: new OrderClaims(db.pool),
    });
    closers.push(() => h.close());
    const redis = await startRedisServer();
    closers.push(() => redis.stop());
    const breakerStore = connectBreakerRedis(redis.url);
    closers.push(() => closeBreakerRedis(breakerStore));
    const proxy = await startProviderProxy(h.sim.url);
    closers.push(() => proxy.close());
    const bundlePath = await workflowBundlePath();
    const fleet = await startFleet(
      {
        temporalAddress: env.address,
        taskQueue: h.taskQueue,
        workflowBundlePath: bundlePath,
        providerUrl: proxy.url,
        apiKey: h.apiKey,
        redisUrl: redis.url,
        keyPrefix: 'model:',
        retry: modelRetry,
        walletsDatabaseUrl: db.url,
      },
      env.client,
    );
    closers.push(() => fleet.close());
    const resetBreaker = async () => void (await breakerStore.flushdb());
    // A second API process-equivalent (its own PaymentsClient, the same claims), for races across processes.
    const secondApi = await h.anotherApi();
    return worldOver(h, secondApi, fleet, db.pool, proxy, resetBreaker, close);
  } catch (err) {
    await close();
    throw err;
  }
}

/** The world's operations over its running parts. */
function worldOver(
  h: ApiWorld,
  secondApi: string,
  fleet: Fleet,
  db: pg.Pool,
  proxy: ProviderProxy,
  resetBreaker: () => Promise<void>,
  close: () => Promise<void>,
): World {
  const merchants = { a: h.a, b: h.b };
  const json = { 'content-type': 'application/json' };
  const faultsUrl = `${h.sim.url}/_sim/faults`;
  const clearFaults = async () => void (await simCall(faultsUrl, { method: 'DELETE' }));
  const addFaults = async (rules: readonly FaultRule[] | readonly object[]) =>
    void (await simCall(faultsUrl, { method: 'POST', headers: json, body: JSON.stringify({ rules }) }));
  const ledger = async () =>
    (await simCall(`${h.sim.url}/_sim/ledger?api_key=${encodeURIComponent(h.apiKey)}`)) as {
      effects: SimEffect[];
      requests: LedgerRequest[];
    };
  let outageTimer: NodeJS.Timeout | undefined;
  let endOutage: (() => Promise<void>) | undefined;
  const stopOutage = async () => {
    clearTimeout(outageTimer);
    const end = endOutage;
    endOutage = undefined;
    await end?.();
  };
  return {
    h,
    fleet,
    db,
    merchant: (name) => merchants[name],
    providerKey: (name, operation, key) => providerIdempotencyKey(merchants[name].id, operation, key),
    async outage(kind, ms) {
      await stopOutage();
      if (kind === 'refused') {
        await proxy.refuse();
        endOutage = () => proxy.restore();
      } else {
        // Before any armed fault (the simulator takes the first live rule that matches): every request, 503.
        await clearFaults();
        await addFaults([{ match: {}, fault: 'status', status: 503, retry_after_s: 1 }]);
        endOutage = clearFaults;
      }
      outageTimer = setTimeout(() => void stopOutage().catch(() => undefined), ms);
    },
    async reset(profiles) {
      await stopOutage();
      await clearFaults();
      await resetBreaker();
      await fleet.reset(profiles);
    },
    api: (method, path, o) =>
      h.request(method, path, {
        token: merchants[o.merchant].token,
        ...(o.second === true ? { baseUrl: secondApi } : {}),
        ...(o.key === undefined ? {} : { key: o.key }),
        ...(o.body === undefined ? {} : { body: o.body }),
      }),
    operatorResolve: (merchant, key, body) =>
      h.request('POST', `/v1/payments/${encodeURIComponent(key)}/resolve?merchantId=${merchants[merchant].id}`, {
        token: h.operator.token,
        body,
      }),
    sim: {
      addFaults,
      // The simulator runs in this process (test/helpers/world.ts): taken off in one synchronous step.
      removeFaults: async (rules) => removeFaultRules(h.sim, rules),
      clearFaults,
      effects: async () => (await ledger()).effects,
      requests: async () => (await ledger()).requests,
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
    async close() {
      await stopOutage();
      await close();
    },
  };
}
