/**
 * End to end: `npm start` supervises its children. With payments in flight (their provider calls held by simulator
 * latency), `kill -9` of the worker process: the API keeps answering, the supervisor restarts the worker with a log
 * line, and every payment settles with exactly one create effect in the simulator's ledger. Then `kill -9` of the
 * simulator: it comes back with its state from its file (the ledger still holds every effect, the payments are
 * still found at the provider). No browser needed. The worker loads the run's workflow bundle (WORKFLOW_BUNDLE_PATH),
 * at its start and its restart, instead of running webpack each time.
 */
import { randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { type InvariantView, checkMoneyInvariant, invariantAnswer } from '../../bench/money-invariant';
import { developmentDefaults } from '../../src/config';
import type { Ledger } from '../../src/simulator/server';
import { HOST, PROJECT_ROOT, Stack, descendants, npmStartEnvironment, readProc } from '../helpers/npm-start';
import { workflowBundlePath } from '../helpers/workflow-bundle';

const START_TIMEOUT_MS = 120_000;
const [merchantId, token] = developmentDefaults.API_TOKENS.split(':') as [string, string];
const PAYMENTS = 4;
/** Holds each payment's create call at the provider long enough to kill the worker during it. */
const CREATE_LATENCY_MS = 3_000;

/** The live process of the stack whose command line names `entry` (e.g. `src/worker.ts`). */
function processOf(stack: Stack, entry: string): number | undefined {
  const found = descendants(stack.pid).filter((p) => {
    try {
      return readFileSync(`/proc/${p.pid}/cmdline`, 'utf8').split('\0').includes(path.join(PROJECT_ROOT, entry));
    } catch {
      return false;
    }
  });
  return found.length === 1 ? found[0]?.pid : undefined;
}

describe('npm start supervises its children (end to end)', () => {
  let tmp: string;
  let stack: Stack | undefined;
  let passed = false;

  beforeAll(() => {
    tmp = mkdtempSync(path.join(os.tmpdir(), 'pw-e2e-supervised-'));
  });

  afterAll(async () => {
    if (stack) {
      if (!passed) console.error(`[e2e] npm start output (last lines):\n${stack.tail(120)}`);
      await stack.kill();
    }
    rmSync(tmp, { recursive: true, force: true });
  }, 60_000);

  it('kill -9 of the worker with payments in flight: the API stays up, the worker comes back, each payment settles with one effect; the simulator keeps its state across a kill -9', async () => {
    const started = Date.now();
    const dbFile = path.join(tmp, 'dev-server.sqlite');
    const { env, ports } = await npmStartEnvironment(dbFile, {
      TASK_QUEUE: `e2e-supervised-${randomUUID()}`,
      LOG_LEVEL: 'info',
      // Each POST answers 202 well before its create call ends: the payments are in flight when the worker dies.
      SUBMIT_WAIT_MS: '500',
      WORKFLOW_BUNDLE_PATH: await workflowBundlePath(),
    });
    const api = `http://${HOST}:${ports.apiPort}`;
    const sim = `http://${HOST}:${ports.simulatorPort}`;
    stack = new Stack(env);
    const s = stack;
    await s.until('"Press Ctrl-C to stop."', () => s.output.includes('Press Ctrl-C to stop.'), START_TIMEOUT_MS);
    // The components log into files beside the state; the console keeps the supervisor's lines.
    const workerLog = path.join(tmp, 'dev-server.logs', 'worker.log');
    await s.until(
      '"worker running" in the worker\'s log file',
      () => existsSync(workerLog) && readFileSync(workerLog, 'utf8').includes('"msg":"worker running"'),
      START_TIMEOUT_MS,
    );
    console.log(`[e2e] stack ready after ${s.elapsedS()} s`);
    const workerPid = processOf(s, 'src/worker.ts');
    expect(workerPid).toBeDefined();

    const faults = await fetch(`${sim}/_sim/faults`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        rules: [{ match: { operation: 'create' }, fault: 'latency', latency_ms: CREATE_LATENCY_MS }],
      }),
    });
    expect(faults.status).toBeLessThan(300);

    const keys = Array.from({ length: PAYMENTS }, () => `sup-${randomUUID()}`);
    const post = (key: string) =>
      fetch(`${api}/v1/payments`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'idempotency-key': key, 'content-type': 'application/json' },
        body: JSON.stringify({
          orderId: `order-${key}`,
          amount: { value: 1500, currency: 'EUR' },
          paymentMethod: 'pm_card_visa',
        }),
        signal: AbortSignal.timeout(30_000),
      });
    const answers = await Promise.all(keys.map(post));
    expect(answers.map((r) => r.status)).toEqual(keys.map(() => 202));
    const answerBodies = await Promise.all(answers.map(async (r) => (await r.json()) as Record<string, unknown>));

    // The creates are at the provider (each held CREATE_LATENCY_MS): kill the worker in the middle of them.
    const ledgerOf = async () =>
      (await (await fetch(`${sim}/_sim/ledger`)).json()) as {
        effects: { operation: string; reference: string }[];
        requests: { operation: string; reference: string | null; status: number | null }[];
      };
    await s.until(
      'every create request at the provider',
      async () => {
        const { requests } = await ledgerOf();
        return keys.every((k) => requests.some((r) => r.operation === 'create' && r.reference === `order-${k}`));
      },
      20_000,
    );
    s.snapshot();
    const killedAt = Date.now();
    process.kill(workerPid as number, 'SIGKILL');

    // The API stays up while the worker is gone.
    const health = await fetch(`${api}/healthz`, { signal: AbortSignal.timeout(5_000) });
    expect(health.status).toBe(200);
    await s.until(
      'restart log line',
      () => /\[start\] worker exited unexpectedly \(SIGKILL\); restarting in/.test(s.output),
      10_000,
    );
    await s.until('a new worker process', () => (processOf(s, 'src/worker.ts') ?? workerPid) !== workerPid, 30_000);
    expect(readProc(processOf(s, 'src/worker.ts') as number)).toBeDefined();
    await s.until('"worker restarted" log line', () => s.output.includes('[start] worker restarted (pid'), 60_000);
    console.log(`[e2e] worker restarted ${((Date.now() - killedAt) / 1000).toFixed(1)} s after kill -9`);
    expect(s.exit).toBeUndefined();

    // Every payment settles, each with exactly one create effect at the provider.
    // A read is a query, answered by a worker: while the workflow's sticky worker is gone it may time out.
    const statusOf = async (key: string) => {
      try {
        const res = await fetch(`${api}/v1/payments/${key}`, {
          headers: { authorization: `Bearer ${token}` },
          signal: AbortSignal.timeout(15_000),
        });
        return ((await res.json()) as { status?: string }).status;
      } catch {
        return undefined;
      }
    };
    await s.until(
      'every payment succeeded',
      async () => (await Promise.all(keys.map(statusOf))).every((st) => st === 'succeeded'),
      60_000,
      { intervalMs: 500 },
    );
    console.log(`[e2e] all ${PAYMENTS} payments succeeded ${((Date.now() - killedAt) / 1000).toFixed(1)} s after kill`);
    const creates = (await ledgerOf()).effects.filter((e) => e.operation === 'create');
    for (const k of keys) expect(creates.filter((e) => e.reference === `order-${k}`)).toHaveLength(1);
    // The money invariant every ledger harness holds (bench/money-invariant.ts): answers and views against the ledger.
    const views = await Promise.all(
      keys.map(async (k) => {
        const res = await fetch(`${api}/v1/payments/${k}`, { headers: { authorization: `Bearer ${token}` } });
        return (await res.json()) as InvariantView;
      }),
    );
    const problems = checkMoneyInvariant({
      payments: keys.map((key, i) => ({ merchantId, key, capture: 'automatic', final: views[i] as InvariantView })),
      answers: keys.map((key, i) =>
        invariantAnswer(
          { merchantId, paymentKey: key, kind: 'charge', opKey: key, amount: 1500, status: 202 },
          answerBodies[i],
        ),
      ),
      ledger: (await ledgerOf()) as unknown as Ledger,
    });
    expect(problems).toEqual([]);

    // The simulator, killed too, comes back with its state: same effects, each payment still found by reference.
    expect(s.output).toContain(`state in ${path.join(tmp, 'dev-server.simulator.json')}`);
    const simPid = processOf(s, 'src/simulator/main.ts') as number;
    expect(simPid).toBeDefined();
    s.snapshot();
    process.kill(simPid, 'SIGKILL');
    await s.until(
      'a new simulator process',
      () => (processOf(s, 'src/simulator/main.ts') ?? simPid) !== simPid,
      30_000,
    );
    await s.until('simulator restarted', () => s.output.includes('[start] simulator restarted (pid'), 30_000);
    const after = (await ledgerOf()).effects.filter((e) => e.operation === 'create');
    for (const k of keys) expect(after.filter((e) => e.reference === `order-${k}`)).toHaveLength(1);
    expect(s.exit).toBeUndefined();

    // Ctrl-C still stops everything.
    s.snapshot();
    s.interrupt();
    await s.until('exit', () => s.exit !== undefined, 30_000, { intervalMs: 100, afterExit: true });
    expect(s.output).toContain('[start] Stopped.');
    await s.until('every stack process gone', () => s.leftovers().length === 0, 10_000, {
      intervalMs: 100,
      afterExit: true,
    });
    console.log(`[e2e] total ${((Date.now() - started) / 1000).toFixed(1)} s`);
    passed = true;
  }, 240_000);
});
