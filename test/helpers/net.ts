/** Network helpers the tests share. */
import { type AddressInfo, createServer } from 'node:net';

/** A port nothing listens on (bound, then released): connecting to it is refused before anything is sent. */
export const closedPort = async (): Promise<number> => {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
};
