/**
 * The model's workers: two worker processes (test/helpers/worker-process.ts) on the bench's task queue, sharing one
 * breaker through Redis, each started with one of two provider configurations. Processes, so a worker can die
 * mid-task (SIGKILL) and a deploy can replace one while the other keeps polling with other `PROVIDER_*` settings.
 */
import type { Client } from '@temporalio/client';
import type { RetryOverrides } from '../../src/domain/retry';
import { defaultMerchantWebhookSettings } from '../../src/merchant-webhooks';
import { type WorkerProcess, type WorkerProcessSpec, spawnWorkerProcess } from '../helpers/worker-process';

/**
 * The two provider configurations of a rolling deploy: the same provider, another total timeout per call (issue 19's
 * reproduction used `PROVIDER_TOTAL_TIMEOUT_MS`). Both fit the model's retry presets.
 */
export const workerProfiles = {
  A: { connectTimeoutMs: 500, totalTimeoutMs: 1_500 },
  B: { connectTimeoutMs: 500, totalTimeoutMs: 1_400 },
} as const;
export type WorkerProfile = keyof typeof workerProfiles;

/** The breaker both processes share: ordinary faults do not trip it, a provider outage does. */
export const modelBreaker: WorkerProcessSpec['breaker'] = {
  failureThreshold: 8,
  window: { durationMs: 60_000, failureRate: 1, minimumCalls: 1_000_000 },
  cooldownMs: 2_000,
  probeTimeoutMs: 2_000,
  jitterMs: 100,
};

/** What every worker process of the fleet shares. */
export interface FleetBase {
  readonly temporalAddress: string;
  readonly taskQueue: string;
  readonly workflowBundlePath: string;
  readonly providerUrl: string;
  readonly apiKey: string;
  readonly redisUrl: string;
  readonly keyPrefix: string;
  readonly retry: RetryOverrides;
  /** The wallet ledger's database: the workers run the wallet activities on it. */
  readonly walletsDatabaseUrl: string;
}

interface Slot {
  profile: WorkerProfile;
  /** The running process, or its start in flight. */
  proc: Promise<WorkerProcess>;
}

/** The model's worker processes. */
export interface Fleet {
  /** The slots' profiles, e.g. `A,B`. */
  describe(): string;
  /** One step of a rolling deploy: drains slot `slot` and starts it again with `profile`; resolves once it polls. */
  deploy(slot: number, profile: WorkerProfile): Promise<void>;
  /**
   * SIGKILLs the worker process that runs the open workflow task of `workflowId` (its pid is the task's identity in
   * the history) and starts its slot again in the background. Answers the slot, or undefined when no task was open.
   */
  killHolder(workflowId: string): Promise<number | undefined>;
  /** Every slot alive with the given profiles (default all A), restarting only those that differ. */
  reset(profiles?: readonly WorkerProfile[]): Promise<void>;
  close(): Promise<void>;
}

/** Starts `size` worker processes with profile A. */
export async function startFleet(base: FleetBase, client: Client, size = 2): Promise<Fleet> {
  const spawnWith = (profile: WorkerProfile) =>
    spawnWorkerProcess({
      temporalAddress: base.temporalAddress,
      taskQueue: base.taskQueue,
      workflowBundlePath: base.workflowBundlePath,
      simulatorUrl: base.providerUrl,
      apiKey: base.apiKey,
      redisUrl: base.redisUrl,
      keyPrefix: base.keyPrefix,
      breaker: modelBreaker,
      provider: workerProfiles[profile],
      retry: base.retry,
      walletsDatabaseUrl: base.walletsDatabaseUrl,
      // What `npm start` and the cluster run: each payment's key answers and events handed over (one activity a task).
      keyRecords: true,
      merchantWebhooks: { databaseUrl: base.walletsDatabaseUrl, settings: defaultMerchantWebhookSettings },
    });
  const slots: Slot[] = Array.from({ length: size }, () => ({ profile: 'A', proc: spawnWith('A') }));
  await Promise.all(slots.map((s) => s.proc));
  const replace = async (slot: Slot, profile: WorkerProfile, how: 'drain' | 'kill') => {
    const old = await slot.proc;
    slot.profile = profile;
    const next = (async () => {
      if (how === 'kill') await old.kill();
      else await old.stop().catch(() => undefined);
      return spawnWith(profile);
    })();
    slot.proc = next;
    return next;
  };
  return {
    describe: () => slots.map((s) => s.profile).join(','),
    async deploy(i, profile) {
      const slot = slots[i % slots.length] as Slot;
      await replace(slot, profile, 'drain');
    },
    async killHolder(workflowId) {
      const events = (await client.workflow.getHandle(workflowId).fetchHistory()).events ?? [];
      const last = events.at(-1);
      const identity = last?.workflowTaskStartedEventAttributes?.identity;
      if (!identity) return undefined;
      const pid = Number(identity.split('@')[0]);
      for (const [i, slot] of slots.entries()) {
        if ((await slot.proc).pid !== pid) continue;
        void replace(slot, slot.profile, 'kill').catch(() => undefined);
        return i;
      }
      return undefined;
    },
    async reset(profiles = []) {
      await Promise.all(
        slots.map(async (slot, i) => {
          const profile = profiles[i] ?? 'A';
          if (slot.profile !== profile) await replace(slot, profile, 'drain');
          await slot.proc;
        }),
      );
    },
    async close() {
      await Promise.all(slots.map(async (s) => (await s.proc.catch(() => undefined))?.stop().catch(() => undefined)));
    },
  };
}
