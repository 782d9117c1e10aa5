/**
 * The ports end-to-end tests give `npm start` (test/helpers/npm-start.ts): stacks started at once never share one.
 * A port is free only until its stack binds it, so concurrent picks must not rely on the bind check alone.
 */
import { readFileSync } from 'node:fs';
import { closedPort, refusedPort, refusesConnections } from '../helpers/net';
import { freePorts, portIsFree } from '../helpers/npm-start';

describe('freePorts', () => {
  it('hands distinct ports to concurrent picks, none of them bound, within this jest worker’s slice', async () => {
    // 80 stacks' worth at once: with random picks checked only by a bind, two of 480 ports in a range of ~22,800
    // collide with a probability of about 99 %.
    const picks = await Promise.all(Array.from({ length: 80 }, () => freePorts(6)));
    const all = picks.flat();
    expect(all).toHaveLength(480);
    expect(new Set(all).size).toBe(480);
    const ephemeral = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
    expect(Math.min(...all)).toBeGreaterThanOrEqual(10_000);
    expect(Math.max(...all)).toBeLessThan(ephemeral);
    // Each jest worker picks from an eighth of that range: two workers never meet.
    const worker = Number(process.env.JEST_WORKER_ID);
    const width = Math.floor((ephemeral - 10_000) / 8);
    if (worker >= 1 && worker <= 8)
      expect(new Set(all.map((p) => Math.floor((p - 10_000) / width)))).toEqual(new Set([worker - 1]));
    expect((await Promise.all(all.slice(0, 12).map(portIsFree))).every(Boolean)).toBe(true);
  });
});

describe('refusedPort', () => {
  it('is refused, and lies below every range a test server binds in; a released closed port is the next listener’s', async () => {
    const { createServer } = await import('node:net');
    const port = await refusedPort();
    expect(await refusesConnections(port)).toBe(true);
    // Servers bind port 0 (the kernel's ephemeral range) or freePorts' 10,000 and up: none can take it.
    expect(port).toBeLessThan(10_000);
    // Why not closedPort for a provider meant to stay down: released, its port can be served by the next listener.
    const released = await closedPort();
    const taker = createServer((socket) => socket.destroy());
    await new Promise<void>((resolve) => taker.listen(released, '127.0.0.1', resolve));
    try {
      expect(await refusesConnections(released)).toBe(false);
    } finally {
      await new Promise<void>((resolve) => taker.close(() => resolve()));
    }
  });
});
