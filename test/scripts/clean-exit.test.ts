/**
 * The supervisor's crash budget is for processes that fail. A process that exits cleanly (code 0), e.g. drained by a
 * deploy's SIGTERM that the supervisor did not send, is restarted without spending it: the CI soak's cluster gave up on
 * a worker whose rolling-deploy SIGTERM came after two kills and a Temporal restart, all within a minute.
 */
import { Supervisor } from '../../scripts/lib/supervisor';

it('restarts a process that keeps exiting cleanly without giving up on it', async () => {
  const gaveUp: string[] = [];
  const supervisor = new Supervisor({ log: () => undefined, onGiveUp: (name) => void gaveUp.push(name) });
  try {
    await supervisor.start({ name: 'clean', command: process.execPath, args: ['-e', 'setTimeout(() => {}, 200)'] });
    const pids = new Set<number>();
    const deadline = Date.now() + 20_000;
    // Six clean exits: a crash budget of 5 within a minute would have given up at the fifth.
    while (pids.size < 7 && gaveUp.length === 0 && Date.now() < deadline) {
      const pid = supervisor.pid('clean');
      if (pid !== undefined) pids.add(pid);
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(gaveUp).toEqual([]);
    expect(pids.size).toBeGreaterThanOrEqual(7);
  } finally {
    await supervisor.stop();
  }
}, 30_000);
