/**
 * A merchant's webhook endpoint for tests: a real HTTP server on 127.0.0.1:0 that records every delivery (headers, raw
 * body, when) and answers as the test scripts it: a status, after a delay, or not at all until released.
 */
import { type IncomingHttpHeaders, type Server, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { MerchantEvent } from '../../src/domain/merchant-events';

/** One delivery as the endpoint saw it. */
export interface Delivery {
  readonly headers: IncomingHttpHeaders;
  readonly body: string;
  readonly event: MerchantEvent;
  readonly atMs: number;
}

/** How the endpoint answers the n-th delivery (0-based): a status, maybe after a delay, or a promise it waits for. */
export type Answer = { readonly status: number; readonly delayMs?: number; readonly until?: Promise<void> };

export interface WebhookReceiver {
  readonly url: string;
  /** Every delivery so far, in arrival order. */
  readonly deliveries: Delivery[];
  /** The most deliveries that were open at once (arrived, neither answered nor given up by the sender). */
  readonly maxOpen: () => number;
  /** Sets how the next deliveries are answered (default 200 at once). */
  answer(script: (n: number, delivery: Delivery) => Answer): void;
  /** Runs `check` on each delivery as it arrives, before it is answered (e.g. reads the payment back). */
  onDelivery(check: (delivery: Delivery) => Promise<void>): void;
  close(): Promise<void>;
}

/** Starts an endpoint at `http://127.0.0.1:<port>/hooks`. */
export async function startWebhookReceiver(): Promise<WebhookReceiver> {
  const deliveries: Delivery[] = [];
  let script: (n: number, delivery: Delivery) => Answer = () => ({ status: 200 });
  let check: ((delivery: Delivery) => Promise<void>) | undefined;
  let open = 0;
  let maxOpen = 0;
  const server: Server = createServer((req, res) => {
    open += 1;
    maxOpen = Math.max(maxOpen, open);
    res.once('close', () => (open -= 1));
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const delivery: Delivery = {
        headers: req.headers,
        body,
        event: JSON.parse(body) as MerchantEvent,
        atMs: Date.now(),
      };
      const n = deliveries.length;
      deliveries.push(delivery);
      const { status, delayMs, until } = script(n, delivery);
      void (async () => {
        await check?.(delivery).catch(() => undefined);
        if (delayMs !== undefined) await new Promise((r) => setTimeout(r, delayMs));
        if (until !== undefined) await until;
        if (!res.destroyed) res.writeHead(status, { 'content-type': 'text/plain' }).end('ok');
      })();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hooks`,
    deliveries,
    maxOpen: () => maxOpen,
    answer: (s) => void (script = s),
    onDelivery: (c) => void (check = c),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
