/**
 * The demo's webhook receiver: a merchant endpoint on 127.0.0.1 (a free port) that checks each delivery's
 * `Payments-Signature` with the secret the API answered, answers 204, and keeps the events for the demo to print.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { MerchantEvent } from '../../src/domain/merchant-events';
import { signatureHeader, verifyEventSignature } from '../../src/merchant-webhooks/signature';

/** One delivery as the receiver saw it. */
export interface ReceivedEvent {
  readonly event: MerchantEvent;
  readonly signed: boolean;
  readonly atMs: number;
}

/** A listening receiver: its URL, what it got, and the secret to check signatures with (set once the PUT answered). */
export interface DemoReceiver {
  readonly url: string;
  readonly received: ReceivedEvent[];
  useSecret(secret: string): void;
  close(): Promise<void>;
}

export async function startDemoReceiver(): Promise<DemoReceiver> {
  const received: ReceivedEvent[] = [];
  let secret = '';
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const header = req.headers[signatureHeader.toLowerCase()];
      const signed = verifyEventSignature(typeof header === 'string' ? header : undefined, body, secret);
      try {
        received.push({ event: JSON.parse(body) as MerchantEvent, signed, atMs: Date.now() });
      } catch {
        // Not an event: refused below like a bad signature.
      }
      res.writeHead(signed ? 204 : 400).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hooks`,
    received,
    useSecret: (s) => void (secret = s),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
