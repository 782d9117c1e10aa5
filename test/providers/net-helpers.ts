import http from 'node:http';
import net from 'node:net';
import { Worker } from 'node:worker_threads';
import { pino, type Logger } from 'pino';
import { isProviderError, type ProviderError } from '../../src/providers/errors';

// Raw servers for transport situations the simulator cannot produce. Everything binds 127.0.0.1, port 0.

export interface TestServer {
  readonly port: number;
  readonly url: string;
  close(): Promise<void>;
}

const listen = async (server: net.Server): Promise<number> => {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen({ host: '127.0.0.1', port: 0 }, resolve);
  });
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('no port');
  return address.port;
};

const closeServer = (server: net.Server, sockets: Set<net.Socket>): Promise<void> => {
  for (const s of sockets) s.destroy();
  return new Promise((resolve) => server.close(() => resolve()));
};

const track = (server: net.Server): Set<net.Socket> => {
  const sockets = new Set<net.Socket>();
  server.on('connection', (s: net.Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  return sockets;
};

/** Accepts connections, reads requests, never answers: a timeout after send. Counts requests and connections. */
export const silentServer = async (): Promise<
  TestServer & { readonly requests: () => number; readonly connections: () => number; readonly open: () => number }
> => {
  let requests = 0;
  let connections = 0;
  const server = net.createServer((socket) => {
    connections++;
    socket.on('data', (chunk) => {
      requests += (chunk.toString('latin1').match(/HTTP\/1\.1\r\n/g) ?? []).length;
    });
    socket.on('error', () => undefined);
  });
  const sockets = track(server);
  const port = await listen(server);
  return {
    port,
    url: `http://127.0.0.1:${port}`,
    requests: () => requests,
    connections: () => connections,
    open: () => sockets.size,
    close: () => closeServer(server, sockets),
  };
};

/**
 * Answers every request with these raw bytes; then destroys the socket, or (`stall`) keeps it open and silent.
 * `raw: ''` with no stall is a reset right after the request arrived.
 */
export const rawResponseServer = async (
  raw: string,
  options: { stall?: boolean } = {},
): Promise<TestServer & { readonly requests: () => number }> => {
  let requests = 0;
  const server = net.createServer((socket) => {
    socket.on('error', () => undefined);
    socket.once('data', () => {
      requests++;
      socket.write(raw, () => {
        if (options.stall !== true) socket.destroy();
      });
    });
  });
  const sockets = track(server);
  const port = await listen(server);
  return { port, url: `http://127.0.0.1:${port}`, requests: () => requests, close: () => closeServer(server, sockets) };
};

/** A plain HTTP server answering one fixed status, headers and body; counts requests. */
export const fixedHttpServer = async (
  status: number,
  body: string,
  headers: Record<string, string> = {},
): Promise<
  TestServer & {
    readonly requests: () => number;
    readonly paths: () => string[];
    readonly received: () => { url: string; headers: http.IncomingHttpHeaders; body: string }[];
  }
> => {
  const received: { url: string; headers: http.IncomingHttpHeaders; body: string }[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      received.push({ url: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
      res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(body);
    });
  });
  const sockets = track(server);
  const port = await listen(server);
  return {
    port,
    url: `http://127.0.0.1:${port}`,
    requests: () => received.length,
    paths: () => received.map((r) => r.url),
    received: () => [...received],
    close: () => closeServer(server, sockets),
  };
};

// The worker listens, reports its port, then blocks its own event loop in Atomics.wait, so libuv never accept()s: once
// the kernel's accept queue is full, further SYNs are dropped and a connect hangs until the client's connect timeout.
const blackholeWorker = `
const net = require('node:net');
const { parentPort, workerData } = require('node:worker_threads');
const server = net.createServer();
server.listen({ host: '127.0.0.1', port: 0, backlog: 1 }, () => {
  parentPort.postMessage(server.address().port);
  Atomics.wait(new Int32Array(workerData), 0, 0);
  server.close();
  process.exit(0);
});
`;

const tryConnect = (port: number, withinMs: number): Promise<net.Socket | null> =>
  new Promise((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port });
    const timer = setTimeout(() => {
      socket.destroy();
      resolve(null);
    }, withinMs);
    socket.once('connect', () => {
      clearTimeout(timer);
      resolve(socket);
    });
    socket.once('error', () => {
      clearTimeout(timer);
      socket.destroy();
      resolve(null);
    });
  });

/** A listening port whose accept queue is full: a real TCP connect that never completes. */
export const blackholeServer = async (): Promise<TestServer> => {
  const shared = new SharedArrayBuffer(4);
  const worker = new Worker(blackholeWorker, { eval: true, workerData: shared });
  const port = await new Promise<number>((resolve, reject) => {
    worker.once('message', (p: number) => resolve(p));
    worker.once('error', reject);
  });
  // Fill the accept queue (backlog 1 holds about two): stop at the first connect that does not complete.
  const fillers: net.Socket[] = [];
  for (let i = 0; i < 16; i++) {
    const socket = await tryConnect(port, 250);
    if (socket === null) break;
    fillers.push(socket);
  }
  return {
    port,
    url: `http://127.0.0.1:${port}`,
    close: async () => {
      for (const s of fillers) s.destroy();
      const exited = new Promise<void>((resolve) => worker.once('exit', () => resolve()));
      Atomics.store(new Int32Array(shared), 0, 1);
      Atomics.notify(new Int32Array(shared), 0);
      await exited;
    },
  };
};

/** The ProviderError a promise rejects with (fails the test if it resolves or rejects with something else). */
export const providerFailure = async (promise: Promise<unknown>): Promise<ProviderError> => {
  try {
    await promise;
  } catch (err) {
    if (isProviderError(err)) return err;
    throw err;
  }
  throw new Error('expected a ProviderError, the call succeeded');
};

/** A pino logger writing into memory, for assertions on what the log carries. */
export const memoryLogger = (): { logger: Logger; lines: () => Record<string, unknown>[]; text: () => string } => {
  const chunks: string[] = [];
  const logger = pino(
    { level: 'debug' },
    {
      write: (chunk: string) => {
        chunks.push(chunk);
      },
    },
  );
  return {
    logger,
    text: () => chunks.join(''),
    lines: () =>
      chunks
        .join('')
        .split('\n')
        .filter((l) => l.length > 0)
        .map((l) => JSON.parse(l) as Record<string, unknown>),
  };
};

/** A logger that drops everything. */
export const silentLogger = (): Logger => pino({ level: 'silent' });
