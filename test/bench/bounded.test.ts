import { forEachBounded, indices } from '../../bench/bounded';

const tick = () => new Promise<void>((resolve) => setImmediate(resolve));

describe('forEachBounded (bench/bounded.ts)', () => {
  it('processes every item once with never more than the concurrency at once', async () => {
    const items = Array.from({ length: 50 }, (_, i) => i);
    let running = 0;
    let most = 0;
    const seen: number[] = [];
    await forEachBounded(items, 4, async (item, index) => {
      expect(index).toBe(item);
      running += 1;
      most = Math.max(most, running);
      // Uneven durations, so workers finish out of order.
      for (let t = 0; t < 1 + (item % 5); t++) await tick();
      seen.push(item);
      running -= 1;
    });
    expect(most).toBe(4);
    expect(seen.sort((a, b) => a - b)).toEqual(items);
  });

  it('starts no more workers than items, and none for no items', async () => {
    let running = 0;
    let most = 0;
    await forEachBounded(['a', 'b'], 8, async () => {
      running += 1;
      most = Math.max(most, running);
      await tick();
      running -= 1;
    });
    expect(most).toBe(2);
    const fn = jest.fn(async () => undefined);
    await forEachBounded([], 8, fn);
    expect(fn).not.toHaveBeenCalled();
  });

  it('rejects with the first failure and starts no item after it', async () => {
    const started: number[] = [];
    await expect(
      forEachBounded([0, 1, 2, 3, 4, 5], 2, async (item) => {
        started.push(item);
        // Item 0 ends after item 1 failed: its worker must not take item 2.
        for (let t = 0; t < (item === 0 ? 3 : 1); t++) await tick();
        if (item === 1) throw new Error('item 1 failed');
      }),
    ).rejects.toThrow('item 1 failed');
    expect(started).toEqual([0, 1]);
  });

  it('starts no item once the signal aborted, lets the started ones end and resolves', async () => {
    const controller = new AbortController();
    const started: number[] = [];
    const ended: number[] = [];
    await forEachBounded(
      indices(0, 10),
      2,
      async (item) => {
        started.push(item);
        if (item === 2) controller.abort();
        // Item 1 is still running when item 2 aborts: it ends, and its worker takes nothing more.
        for (let t = 0; t < (item === 1 ? 3 : 1); t++) await tick();
        ended.push(item);
      },
      { signal: controller.signal },
    );
    expect(started).toEqual([0, 1, 2]);
    expect(ended.sort((a, b) => a - b)).toEqual([0, 1, 2]);
  });

  it('starts nothing under a signal that aborted before the call', async () => {
    const fn = jest.fn(async () => undefined);
    await forEachBounded([1, 2, 3], 2, fn, { signal: AbortSignal.abort() });
    expect(fn).not.toHaveBeenCalled();
  });

  it('indices: from up to (not including) to, none when to <= from', () => {
    expect(indices(3, 7)).toEqual([3, 4, 5, 6]);
    expect(indices(0, 0)).toEqual([]);
    expect(indices(5, 2)).toEqual([]);
  });

  it('refuses a concurrency below 1', async () => {
    await expect(forEachBounded([1], 0, async () => undefined)).rejects.toThrow('concurrency must be >= 1');
  });
});
