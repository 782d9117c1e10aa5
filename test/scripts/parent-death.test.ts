/**
 * What a stack supervisor starts dies with it: the supervised processes (scripts/lib/supervisor.ts) and the Redis that
 * `npm run cluster` starts beside them (scripts/lib/redis-server.ts) exit when the supervisor is killed with SIGKILL,
 * which runs no handler. test/e2e/npm-start-supervisor-death.test.ts proves the same of the whole `npm start`.
 */
import { spawn } from 'node:child_process';
import path from 'node:path';
import { dieWithParent, findSetpriv } from '../../scripts/lib/parent-death';
import { type ProcessRef, processStart, stillSame } from '../../scripts/lib/processes';

const fixture = path.join(__dirname, 'fixtures', 'tiny-stack.ts');

/** Waits until none of `refs` runs, answering how long it took (or undefined after `timeoutMs`). */
async function goneWithin(refs: readonly ProcessRef[], timeoutMs: number): Promise<number | undefined> {
  const started = Date.now();
  while (Date.now() - started < timeoutMs) {
    if (refs.every((r) => !stillSame(r))) return Date.now() - started;
    await new Promise((r) => setTimeout(r, 50));
  }
  return undefined;
}

it('wraps a command in setpriv --pdeathsig (as a user when asked), or runs it as it is without setpriv', () => {
  expect(
    dieWithParent('postgres', ['-D', 'x'], { signal: 'SIGINT', user: 'postgres', setpriv: '/usr/bin/setpriv' }),
  ).toEqual({
    command: '/usr/bin/setpriv',
    args: ['--reuid=postgres', '--regid=postgres', '--init-groups', '--pdeathsig=SIGINT', '--', 'postgres', '-D', 'x'],
    parentDeath: true,
  });
  expect(dieWithParent('node', ['a.js'], { signal: 'SIGTERM', setpriv: null })).toEqual({
    command: 'node',
    args: ['a.js'],
    parentDeath: false,
  });
  expect(dieWithParent('postgres', [], { signal: 'SIGINT', user: 'postgres', setpriv: null }).command).toBe('runuser');
});

const withSetpriv = findSetpriv() ? it : it.skip;

withSetpriv(
  'SIGKILL of the supervisor: its supervised process and its Redis exit',
  async () => {
    const supervisor = spawn(process.execPath, ['--import', 'tsx', fixture], { stdio: ['ignore', 'pipe', 'inherit'] });
    const pids = await new Promise<{ sleeper: number; redis: number }>((resolve, reject) => {
      let out = '';
      supervisor.stdout.on('data', (d: Buffer) => {
        out += d.toString();
        if (out.includes('\n'))
          resolve(JSON.parse(out.slice(0, out.indexOf('\n'))) as { sleeper: number; redis: number });
      });
      supervisor.once('exit', (code) => reject(new Error(`the fixture exited (${code}) before it printed its pids`)));
    });
    const refs = [pids.sleeper, pids.redis].map((pid) => ({ pid, start: processStart(pid) }));
    expect(refs.every((r) => r.start !== undefined)).toBe(true);

    supervisor.kill('SIGKILL');
    const ms = await goneWithin(refs, 10_000);
    console.log(`[parent-death] supervised process and Redis gone ${ms} ms after SIGKILL of their supervisor`);
    for (const r of refs) if (stillSame(r)) process.kill(r.pid, 'SIGKILL');
    expect(ms).toBeDefined();
  },
  30_000,
);
