/**
 * End to end: `npm start`'s supervisor dies without stopping its stack (SIGKILL of the supervisor process; SIGHUP to
 * the whole process group, as a terminal that closes sends it), and nothing of the stack is left behind: every process
 * it started is gone and every port free, so the next `npm start` on the same ports and state starts. Where a process
 * outlived its supervisor all the same (no setpriv, a signal ignored), the next start stops it from the stack file.
 *
 * The three scenarios run side by side (`it.concurrent`), each on ports and state of its own: a stack's start mostly
 * waits on its processes coming up one after another, so their starts overlap well. Their workers load the run's
 * workflow bundle (WORKFLOW_BUNDLE_PATH) instead of each running webpack at start: what is checked here is the
 * processes, not the workflow code.
 */
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { processStart } from '../../scripts/lib/processes';
import {
  HOST,
  PROJECT_ROOT,
  Stack,
  descendants,
  npmStartEnvironment,
  portIsFree,
  readProc,
} from '../helpers/npm-start';
import { workflowBundlePath } from '../helpers/workflow-bundle';

const START_TIMEOUT_MS = 120_000;
/** How long the stack may take to be gone after its supervisor died. */
const GONE_WITHIN_MS = 20_000;

/** The pid of the stack's process whose command line names `entry`. */
function pidOf(stack: Stack, entry: string): number | undefined {
  return descendants(stack.pid).find((p) => {
    try {
      return readFileSync(`/proc/${p.pid}/cmdline`, 'utf8').split('\0').includes(path.join(PROJECT_ROOT, entry));
    } catch {
      return false;
    }
  })?.pid;
}

/** Waits for `check`, answering how long it took, or undefined when it did not hold within `timeoutMs`. */
async function within(check: () => boolean | Promise<boolean>, timeoutMs: number): Promise<number | undefined> {
  const started = Date.now();
  while (Date.now() - started < timeoutMs) {
    if (await check()) return Date.now() - started;
    await new Promise((r) => setTimeout(r, 100));
  }
  return undefined;
}

describe('npm start leaves nothing behind when its supervisor dies (end to end)', () => {
  let tmp: string;
  let bundle: string;
  const stacks: Stack[] = [];

  beforeAll(async () => {
    tmp = mkdtempSync(path.join(os.tmpdir(), 'pw-e2e-death-'));
    bundle = await workflowBundlePath();
  }, 120_000);

  afterAll(async () => {
    for (const s of stacks) await s.kill();
    rmSync(tmp, { recursive: true, force: true });
  }, 60_000);

  async function startStack(env: NodeJS.ProcessEnv): Promise<Stack> {
    const s = new Stack(env);
    stacks.push(s);
    await s.until('"Press Ctrl-C to stop."', () => s.output.includes('Press Ctrl-C to stop.'), START_TIMEOUT_MS);
    s.snapshot();
    return s;
  }

  /** Free ports and a state file of their own: one stack, then a second on the same ones. */
  async function environment(): Promise<{ env: NodeJS.ProcessEnv; ports: number[] }> {
    const { env, ports } = await npmStartEnvironment(path.join(tmp, `${randomUUID()}.sqlite`), {
      WORKFLOW_BUNDLE_PATH: bundle,
    });
    return { env, ports: Object.values(ports) };
  }

  /**
   * After the supervisor died: every process the stack had is gone and every port free within GONE_WITHIN_MS, and a
   * second `npm start` on the same ports and state starts (and stops on Ctrl-C).
   */
  async function expectNothingLeft(first: Stack, env: NodeJS.ProcessEnv, ports: number[], how: string) {
    const diedAt = Date.now();
    const goneMs = await within(
      async () => first.leftovers().length === 0 && (await Promise.all(ports.map(portIsFree))).every(Boolean),
      GONE_WITHIN_MS,
    );
    const leftovers = first.describeLeftovers();
    // A leftover seen 3 times in ~15 CI runs (the API, SIGTERMed, 20 s after the supervisor's SIGKILL), never on demand:
    // say why. Its stop now has a deadline no blocked event loop holds off (src/exit-deadline.ts).
    if (goneMs === undefined) console.log(`[e2e] ${how}: what is left is doing:\n${first.diagnoseLeftovers()}`);
    console.log(
      `[e2e] ${how}: ${goneMs === undefined ? `still running after ${GONE_WITHIN_MS / 1000} s: ${leftovers}` : `stack gone ${(goneMs / 1000).toFixed(1)} s after`}`,
    );

    const second = new Stack(env);
    stacks.push(second);
    await second
      .until('"Press Ctrl-C to stop."', () => second.output.includes('Press Ctrl-C to stop.'), START_TIMEOUT_MS)
      .catch(() => undefined);
    const startedAgain = second.output.includes('Press Ctrl-C to stop.');
    console.log(
      `[e2e] ${how}: second npm start ${startedAgain ? `up after ${second.elapsedS()} s` : 'refused'}; its first lines:\n` +
        second.output.split('\n').slice(0, 6).join('\n'),
    );
    expect({ leftovers: goneMs === undefined ? leftovers : '' }).toEqual({ leftovers: '' });
    expect(startedAgain).toBe(true);
    console.log(`[e2e] ${how}: ${((Date.now() - diedAt) / 1000).toFixed(1)} s from the kill to a second stack up`);

    second.snapshot();
    second.interrupt();
    await second.until('exit', () => second.exit !== undefined, 30_000, { intervalMs: 100, afterExit: true });
    await second.until('every process gone', () => second.leftovers().length === 0, 10_000, {
      intervalMs: 100,
      afterExit: true,
    });
  }

  it.concurrent(
    'SIGKILL of the supervisor: its children exit, the next npm start starts',
    async () => {
      const { env, ports } = await environment();
      const first = await startStack(env);
      const simulator = pidOf(first, 'src/simulator/main.ts');
      expect(simulator).toBeDefined();
      const supervisor = readProc(simulator as number)?.ppid as number;
      expect(readFileSync(`/proc/${supervisor}/cmdline`, 'utf8')).toContain('scripts/start.ts');
      process.kill(supervisor, 'SIGKILL');
      await expectNothingLeft(first, env, ports, 'SIGKILL of the supervisor');
    },
    300_000,
  );

  it.concurrent(
    'SIGHUP to the process group (the terminal closed): the stack stops, the next npm start starts',
    async () => {
      const { env, ports } = await environment();
      const first = await startStack(env);
      process.kill(-first.pid, 'SIGHUP');
      await expectNothingLeft(first, env, ports, 'SIGHUP of the terminal');
    },
    300_000,
  );

  it.concurrent(
    'a process a dead supervisor left holding a port: the next npm start stops it from the stack file, then starts',
    async () => {
      const dbFile = path.join(tmp, `${randomUUID()}.sqlite`);
      const { env, ports } = await npmStartEnvironment(dbFile, { WORKFLOW_BUNDLE_PATH: bundle });
      // A leftover "simulator": its own process group, holding the simulator's port, recorded by pid and start time.
      const leftover = spawn(
        process.execPath,
        ['-e', `require('net').createServer().listen(${ports.simulatorPort}, '${HOST}'); setInterval(() => {}, 60000)`],
        { detached: true, stdio: 'ignore' },
      );
      const pid = leftover.pid as number;
      await within(async () => !(await portIsFree(ports.simulatorPort)), 10_000);
      const dead = spawn(process.execPath, ['-e', '0']);
      await new Promise((resolve) => dead.once('exit', resolve));
      writeFileSync(
        dbFile.replace(/\.sqlite$/, '.stack.json'),
        JSON.stringify({
          kind: 'dev',
          startPid: dead.pid,
          startStart: '1',
          services: {
            simulator: { pid, start: processStart(pid), stopSignal: 'SIGTERM', state: 'running', restarts: 0 },
          },
        }),
      );
      const s = new Stack(env);
      stacks.push(s);
      await s
        .until('"Press Ctrl-C to stop."', () => s.output.includes('Press Ctrl-C to stop.'), START_TIMEOUT_MS)
        .finally(() => {
          if (leftover.exitCode === null && leftover.signalCode === null) leftover.kill('SIGKILL');
        });
      console.log(`[e2e] stale stack file: ${s.output.split('\n')[0]}`);
      expect(s.output).toMatch(
        new RegExp(
          `^\\[start\\] A previous npm start ended without stopping its processes; stopped what it left running in ` +
            `[\\d.]+ s: simulator \\(pid ${pid}\\)\\.$`,
          'm',
        ),
      );
      s.snapshot();
      s.interrupt();
      await s.until('exit', () => s.exit !== undefined, 30_000, { intervalMs: 100, afterExit: true });
    },
    300_000,
  );
});
