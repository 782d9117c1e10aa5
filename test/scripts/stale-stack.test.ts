/**
 * A start that finds the stack file of a run whose supervisor died (scripts/lib/stale-stack.ts): it stops the
 * processes that run left, once it checked each is the one recorded (pid and start time); it never signals a pid that
 * now belongs to another process; it names what it cannot confirm; and it refuses while that supervisor still runs.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { processStart, stillSame } from '../../scripts/lib/processes';
import { StackRunningError, describeReclaim, reclaimStaleStack } from '../../scripts/lib/stale-stack';

let tmp: string;
const started: ChildProcess[] = [];

beforeAll(() => {
  tmp = mkdtempSync(path.join(os.tmpdir(), 'pw-stale-stack-'));
});

afterAll(() => {
  for (const c of started) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  rmSync(tmp, { recursive: true, force: true });
});

/** A process leading its own group, as the supervisor starts them; `ignoreTerm`: it ignores SIGTERM. */
function orphanLike(ignoreTerm = false): { pid: number; start: string } {
  const code = `${ignoreTerm ? "process.on('SIGTERM', () => {});" : ''} setInterval(() => {}, 60000)`;
  const child = spawn(process.execPath, ['-e', code], { detached: true, stdio: 'ignore' });
  started.push(child);
  const pid = child.pid as number;
  return { pid, start: processStart(pid) as string };
}

/** A pid that no longer runs (a process that already exited). */
async function deadPid(): Promise<number> {
  const child = spawn(process.execPath, ['-e', '0'], { stdio: 'ignore' });
  await new Promise((resolve) => child.once('exit', resolve));
  return child.pid as number;
}

function stackFile(content: unknown): string {
  const file = path.join(tmp, `${Math.random().toString(36).slice(2)}.stack.json`);
  writeFileSync(file, JSON.stringify(content));
  return file;
}

it('stops what a dead supervisor left (its stop signal, then SIGKILL) and says so', async () => {
  const simulator = orphanLike();
  const stubborn = orphanLike(true);
  await new Promise((r) => setTimeout(r, 300)); // the SIGTERM handler is installed
  const file = stackFile({
    startPid: await deadPid(),
    startStart: '1',
    services: {
      simulator: { ...simulator, stopSignal: 'SIGTERM' },
      worker: { ...stubborn, stopSignal: 'SIGTERM' },
    },
  });
  const report = await reclaimStaleStack(file, { what: 'npm start', graceMs: 1_000 });
  expect(report.stopped).toEqual([`simulator (pid ${simulator.pid})`, `worker (pid ${stubborn.pid})`]);
  expect(stillSame(simulator)).toBe(false);
  expect(stillSame(stubborn)).toBe(false);
  const [line] = describeReclaim(report, 'npm start');
  console.log(`[stale-stack] ${line}`);
  expect(line).toMatch(/^A previous npm start ended without stopping its processes; stopped what it left running in /);
});

it('never signals a pid recorded with another start time (the pid was reused)', async () => {
  const other = orphanLike();
  const file = stackFile({ startPid: await deadPid(), services: { api: { pid: other.pid, start: '42' } } });
  const report = await reclaimStaleStack(file, { what: 'npm start', graceMs: 500 });
  expect(report).toMatchObject({ stopped: [], unconfirmed: [] });
  expect(stillSame(other)).toBe(true);
});

it('names, but leaves alone, a process recorded without a start time that does not look like ours', async () => {
  const other = orphanLike();
  const file = stackFile({ startPid: await deadPid(), services: { postgres: { pid: other.pid } } });
  const report = await reclaimStaleStack(file, { what: 'npm run cluster', graceMs: 500 });
  expect(report.stopped).toEqual([]);
  expect(report.unconfirmed).toEqual([expect.stringMatching(new RegExp(`^postgres \\(pid ${other.pid}: `))]);
  expect(stillSame(other)).toBe(true);
  expect(describeReclaim(report, 'npm run cluster').join('\n')).toContain('could not be confirmed as its own');
});

it('refuses while the recorded supervisor still runs, naming its pid', async () => {
  const supervisor = orphanLike();
  const child = orphanLike();
  const file = stackFile({ startPid: supervisor.pid, startStart: supervisor.start, services: { worker: child } });
  await expect(reclaimStaleStack(file, { what: 'npm start' })).rejects.toThrow(
    new StackRunningError(
      supervisor.pid,
      `Another npm start (pid ${supervisor.pid}) is running this stack (${file}). Stop it first: Ctrl-C in its ` +
        `terminal, or kill ${supervisor.pid}.`,
    ),
  );
  expect(stillSame(child)).toBe(true);
});

it('does nothing without a stack file', async () => {
  await expect(reclaimStaleStack(path.join(tmp, 'none.json'), { what: 'npm start' })).resolves.toMatchObject({
    stopped: [],
    unconfirmed: [],
  });
});
