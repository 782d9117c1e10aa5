/**
 * A stopping service process ends by its deadline even when its event loop is blocked (src/exit-deadline.ts). The CI
 * leftover it is for: the API, SIGTERMed by its supervisor's death, still running 20 s later, its main thread asleep in
 * a futex and its drain limit (an event-loop timer) never fired. The blocked case here is the one mechanism we know
 * of: pino's synchronous stdout write retrying EAGAIN forever on a pipe whose reader is alive but not reading.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import path from 'node:path';

const fixture = path.join(__dirname, 'fixtures', 'stalled-drain.ts');

/** The fixture with `drain`, its stdout a pipe this test never reads; resolves once it said `ready`. */
async function started(drain: string): Promise<ChildProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', fixture, drain], { stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout?.pause();
  await new Promise<void>((resolve, reject) => {
    let err = '';
    child.stderr?.on('data', (chunk: Buffer) => {
      err += chunk.toString();
      if (err.includes('ready')) resolve();
    });
    child.once('exit', (code) => reject(new Error(`fixture exited ${code} before ready: ${err}`)));
  });
  return child;
}

/** How the child ended within `ms`: its exit code or signal, or `running`. */
function endWithin(child: ChildProcess, ms: number): Promise<string> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve('running'), ms);
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      resolve(signal ?? `exit ${code}`);
    });
  });
}

const children: ChildProcess[] = [];
afterAll(() => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
});

it('a drain blocked in a stalled stdout write is SIGKILLed at its deadline (drain limit + grace)', async () => {
  const child = await started('log');
  children.push(child);
  child.kill('SIGTERM');
  // Drain limit 1 s + grace 1 s: killed about 2 s after the signal. Without the deadline the process never ends.
  expect(await endWithin(child, 10_000)).toBe('SIGKILL');
}, 30_000);

it('a drain that hangs with its event loop free exits 1 at the drain limit, before the deadline', async () => {
  const child = await started('hang');
  children.push(child);
  child.stdout?.resume();
  child.kill('SIGTERM');
  expect(await endWithin(child, 10_000)).toBe('exit 1');
}, 30_000);

it('a drain that finishes exits 0, the deadline thread holding nothing up', async () => {
  const child = await started('quick');
  children.push(child);
  child.stdout?.resume();
  child.kill('SIGINT');
  expect(await endWithin(child, 10_000)).toBe('exit 0');
}, 30_000);
