/**
 * The soak's adversaries of issue 19, beside its random faults and kills: a rolling deploy of the workers into other
 * `PROVIDER_*` settings (one of them with a workflow cache of one), a provider outage longer than every retry budget
 * that begins with every worker killed in the middle of local first create attempts, and one 429 with a Retry-After
 * of minutes. Each is timed by the load (a fraction of it) and logged; the verdict (bench/soak-check.ts) judges what
 * they did to the money.
 */
import { writeFileSync } from 'node:fs';

/** The simulator's own chaos during the whole soak (each rule draws for itself, in order). */
export const baseFaultRules = [
  { fault: 'commit_then_drop', probability: 0.05 },
  { fault: 'status', status: 503, retry_after_s: 1, probability: 0.05 },
  { fault: 'status', status: 429, probability: 0.02 },
  { fault: 'reset_before_commit', probability: 0.01 },
] as const;

/**
 * The rolling deploy's new settings: another total timeout per provider call (the first defect of issue 19 was seen
 * with `PROVIDER_TOTAL_TIMEOUT_MS=9000` beside the default 10000).
 */
export const deployedSettings = { PROVIDER_TOTAL_TIMEOUT_MS: '9000', PROVIDER_CONNECT_TIMEOUT_MS: '1500' };

/** What the adversaries need from the soak. */
export interface SoakControls {
  readonly log: (line: string) => void;
  /** A call to the simulator's control API. */
  simulator(pathname: string, init?: RequestInit): Promise<unknown>;
  /** Signals a supervised service and waits until the supervisor has it running again. */
  killService(fault: string, name: string, signal: NodeJS.Signals): Promise<void>;
  /** The supervised services now (`worker-1`, ...). */
  services(): readonly string[];
  /** The cluster's per-worker settings file (scripts/cluster.ts), when the stack has one. */
  readonly workerEnvFile: string | undefined;
  readonly seed: number;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
const json = { 'content-type': 'application/json' };

/** Sets the simulator's fault rules to `rules` (none: only the base chaos again). */
export async function setFaults(c: SoakControls, rules: readonly object[] = baseFaultRules): Promise<void> {
  await c.simulator('/_sim/faults', { method: 'DELETE' });
  await c.simulator('/_sim/faults', { method: 'POST', headers: json, body: JSON.stringify({ seed: c.seed, rules }) });
}

/**
 * The first worker of the rolling deploy also keeps one workflow in its cache: under the soak's load nearly every task
 * it takes, and every query it answers, replays the payment's history. Whatever a replay rebuilds otherwise than the
 * run did then reaches the answers and key records the verdict compares (a view stamped from an earlier task's clock:
 * README, soak verdict), and a replay that fails wedges its payment (counted stuck). Not none: a worker without a
 * cache is refused (src/config/env.ts says why).
 */
export const replayingWorkerSettings = { ...deployedSettings, WORKER_MAX_CACHED_WORKFLOWS: '1' };

/**
 * Restarts the workers one by one into {@link deployedSettings} (`gapMs` apart, so the fleet runs mixed meanwhile),
 * the first into {@link replayingWorkerSettings}: the cluster's supervisor starts each again with the settings file's
 * entry.
 */
export async function rollingDeploy(c: SoakControls, gapMs: number): Promise<void> {
  if (!c.workerEnvFile) {
    c.log('rolling deploy: the stack has no per-worker settings file (npm start?); skipped');
    return;
  }
  const deployed: Record<string, Record<string, string>> = {};
  const workers = c.services().filter((n) => n.startsWith('worker'));
  for (const [i, worker] of workers.entries()) {
    const settings = i === 0 ? replayingWorkerSettings : deployedSettings;
    deployed[worker] = settings;
    writeFileSync(c.workerEnvFile, JSON.stringify(deployed, null, 2));
    await c.killService(`rolling deploy (${JSON.stringify(settings)})`, worker, 'SIGTERM');
    await sleep(gapMs);
  }
}

/**
 * A provider outage of `ms` that begins in the middle of local first create attempts: every create is held 3 s at the
 * provider for a few seconds, every worker is SIGKILLed while they are, then the provider answers 503 to everything
 * (its breaker opens, so most later writes are refused before they leave), then the base chaos again.
 */
export async function outageAfterCrash(c: SoakControls, ms: number): Promise<void> {
  await setFaults(c, [{ match: { operation: 'create' }, fault: 'latency', latency_ms: 3_000 }, ...baseFaultRules]);
  await sleep(2_000);
  const workers = c.services().filter((n) => n.startsWith('worker'));
  await setFaults(c, [{ match: {}, fault: 'status', status: 503, retry_after_s: 5 }]);
  c.log(`provider outage: 503 to every request for ${Math.round(ms / 1000)} s, after a kill of every worker`);
  await Promise.all(workers.map((w) => c.killService('worker kill during local first creates', w, 'SIGKILL')));
  await sleep(ms);
  await setFaults(c);
  c.log('provider outage over');
}

/** One 429 with `Retry-After: seconds` on the next write: the shared cool-down then holds every write for minutes. */
export async function longRetryAfter(c: SoakControls, seconds: number): Promise<void> {
  await setFaults(c, [
    { match: { operation: 'capture' }, fault: 'status', status: 429, retry_after_s: seconds, times: 1 },
    ...baseFaultRules,
  ]);
  c.log(`a 429 with Retry-After: ${seconds} armed on the next capture`);
}
