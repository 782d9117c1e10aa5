/**
 * The port check before a stack starts (scripts/lib/ports.ts): a taken port is refused, naming the variable that moves
 * it; with a wait (ports whose stale holders were just stopped) it is tried again until it is released or the wait ends.
 */
import net from 'node:net';
import { assertPortsFree } from '../../scripts/lib/ports';

/** A server holding a free port of 127.0.0.1. */
async function holding(): Promise<{ port: number; close(): Promise<void> }> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  return { port, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}

const stackPort = (port: number) => ({ port, purpose: 'simulator', change: 'set SIMULATOR_PORT to another port' });

it('refuses a taken port at once, naming what moves it', async () => {
  const held = await holding();
  try {
    await expect(assertPortsFree([stackPort(held.port)])).rejects.toThrow(
      new RegExp(`Port ${held.port} \\(simulator\\) is already in use .*set SIMULATOR_PORT`),
    );
  } finally {
    await held.close();
  }
});

it('with a wait, takes a port its holder releases within it, and refuses one held past it', async () => {
  const released = await holding();
  setTimeout(() => void released.close(), 300);
  await expect(assertPortsFree([stackPort(released.port)], undefined, { waitMs: 3_000 })).resolves.toBeUndefined();

  const kept = await holding();
  try {
    const started = Date.now();
    await expect(assertPortsFree([stackPort(kept.port)], undefined, { waitMs: 400 })).rejects.toThrow(/already in use/);
    expect(Date.now() - started).toBeGreaterThanOrEqual(400);
  } finally {
    await kept.close();
  }
});
