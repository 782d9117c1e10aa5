/** Network helpers the tests share. */
import { type AddressInfo, connect, createServer } from 'node:net';

/**
 * A port nothing listens on right now (bound, then released), for a server the test starts on it later. To be refused
 * for a while, use {@link refusedPort}: a released port is one the kernel hands to the next `listen(0)` of any process.
 */
export const closedPort = async (): Promise<number> => {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
};

/** Whether a connection to 127.0.0.1:`port` is refused (nothing listens there). */
export const refusesConnections = (port: number): Promise<boolean> =>
  new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(false);
    });
    socket.once('error', (err: NodeJS.ErrnoException) => resolve(err.code === 'ECONNREFUSED'));
  });

let refused: Promise<number> | undefined;

/**
 * A port connections are refused on for the whole run (a provider that is down, a database that is not there): TCP
 * port 1 (tcpmux, served by nothing here), below the ports every test server binds (`listen(0)` takes the kernel's
 * ephemeral range, `freePorts` 10,000 and up). A {@link closedPort} is not that: released, it can be the next
 * `listen(0)` of another test file's server, and a provider meant to be down then answers (seen once under the full
 * suite: the wallet test's `down` provider answered, and a split payment failed without `provider_unavailable`).
 * Checked once per file; where something does listen on port 1, a closed port is used instead.
 */
export const refusedPort = (): Promise<number> =>
  (refused ??= refusesConnections(1).then((yes) => (yes ? 1 : closedPort())));
