import { CrashPolicy } from '../../scripts/lib/crash-policy';

describe('CrashPolicy (the supervisor restarts with backoff, gives up on repeated crashes)', () => {
  const clock = () => {
    let t = 1_000_000;
    return { now: () => t, advance: (ms: number) => (t += ms) };
  };

  it('doubles the restart delay per crash in the window, capped, and gives up at the 5th crash within a minute', () => {
    const c = clock();
    const policy = new CrashPolicy({ now: c.now, initialDelayMs: 500, maxDelayMs: 3_000 });
    const verdicts = [1, 2, 3, 4, 5].map(() => {
      c.advance(5_000);
      return policy.crashed();
    });
    expect(verdicts).toEqual([
      { action: 'restart', delayMs: 500, crashesInWindow: 1 },
      { action: 'restart', delayMs: 1_000, crashesInWindow: 2 },
      { action: 'restart', delayMs: 2_000, crashesInWindow: 3 },
      { action: 'restart', delayMs: 3_000, crashesInWindow: 4 },
      { action: 'give_up', crashesInWindow: 5 },
    ]);
  });

  it('forgets crashes older than the window: a worker killed every 30 s is restarted forever', () => {
    const c = clock();
    const policy = new CrashPolicy({ now: c.now });
    for (let i = 0; i < 50; i++) {
      c.advance(30_000);
      expect(policy.crashed()).toEqual({
        action: 'restart',
        delayMs: i === 0 ? 500 : 1_000,
        crashesInWindow: i === 0 ? 1 : 2,
      });
    }
  });

  it('a crash exactly one window after another no longer counts it', () => {
    const c = clock();
    const policy = new CrashPolicy({ now: c.now, maxCrashes: 2, windowMs: 60_000 });
    expect(policy.crashed().action).toBe('restart');
    c.advance(60_000);
    expect(policy.crashed()).toEqual({ action: 'restart', delayMs: 500, crashesInWindow: 1 });
    c.advance(59_999);
    expect(policy.crashed()).toEqual({ action: 'give_up', crashesInWindow: 2 });
  });
});
