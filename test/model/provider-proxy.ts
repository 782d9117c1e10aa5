/**
 * A TCP proxy between the workers and the simulator, so the model can take the provider off the network: `refuse()`
 * stops listening (every new connection is refused: a write that provably never left) and drops the open ones (a
 * request on the wire at that instant has an unknown outcome, as in a real outage); `restore()` listens again on the
 * same port. The simulator itself keeps its state and ledger.
 */
import net from 'node:net';

export interface ProviderProxy {
  /** What the workers call instead of the simulator. */
  readonly url: string;
  /** True while connections are refused. */
  readonly refusing: boolean;
  refuse(): Promise<void>;
  restore(): Promise<void>;
  close(): Promise<void>;
}

const listen = (server: net.Server, port: number) =>
  new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });

/** Starts a proxy on a free port of 127.0.0.1 in front of `targetUrl`. */
export async function startProviderProxy(targetUrl: string): Promise<ProviderProxy> {
  const target = new URL(targetUrl);
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(target.port), target.hostname);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      s.on('error', () => {
        client.destroy();
        upstream.destroy();
      });
    }
    client.pipe(upstream).pipe(client);
  });
  await listen(server, 0);
  const port = (server.address() as net.AddressInfo).port;
  let refusing = false;
  const dropAll = () => {
    for (const s of sockets) s.destroy();
  };
  return {
    url: `http://127.0.0.1:${port}`,
    get refusing() {
      return refusing;
    },
    async refuse() {
      if (refusing) return;
      refusing = true;
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      // Pooled keep-alive connections would still reach the provider: a refused provider has none.
      dropAll();
      await closed;
    },
    async restore() {
      if (!refusing) return;
      await listen(server, port);
      refusing = false;
    },
    async close() {
      dropAll();
      if (!refusing) await new Promise<void>((resolve) => server.close(() => resolve()));
      refusing = true;
    },
  };
}
