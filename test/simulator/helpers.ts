import { randomUUID } from 'node:crypto';
import http, { type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { RunningSimulator } from '../../src/simulator/server';
import { type Probe, eventually } from '../helpers/eventually';

/** A fresh api key, so every test has its own merchant (payments and keys are scoped per api key). */
export const newApiKey = (): string => `sk_test_${randomUUID()}`;

/** A fresh idempotency key. */
export const newKey = (): string => `key_${randomUUID()}`;

/** A decoded simulator answer. */
export interface SimResponse {
  status: number;
  headers: Headers;
  // Tests read arbitrary fields; the body shapes are asserted with expect().
  body: Record<string, unknown>;
}

/** Options of {@link call}. */
export interface CallOptions {
  apiKey?: string;
  key?: string;
  body?: unknown;
}

/** One request to the simulator with fetch. */
export async function call(
  sim: Pick<RunningSimulator, 'url'>,
  method: string,
  path: string,
  { apiKey, key, body }: CallOptions = {},
): Promise<SimResponse> {
  const headers: Record<string, string> = {};
  if (apiKey) headers.authorization = `Bearer ${apiKey}`;
  if (key) headers['idempotency-key'] = key;
  if (body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(`${sim.url}${path}`, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text ? (JSON.parse(text) as Record<string, unknown>) : {} };
}

/** A valid create body; override any field. */
export const createBody = (over: Record<string, unknown> = {}): Record<string, unknown> => ({
  amount: 1000,
  currency: 'EUR',
  reference: `order_${randomUUID()}`,
  payment_method: 'pm_card_visa',
  capture: 'automatic',
  ...over,
});

/** The simulator tests' {@link eventually}: every 10 ms for up to 5 s (the simulator runs in this process). */
export const waitFor = <T>(what: string, probe: Probe<T>): Promise<T> => eventually(what, probe, 5_000, 10);

/** One request a {@link Receiver} got. */
export interface Received {
  headers: IncomingHttpHeaders;
  raw: string;
  event: { id: string; type: string; created: number; data: Record<string, Record<string, unknown>> };
}

/** A local webhook receiver on a random port. */
export interface Receiver {
  url: string;
  /** Every request received, failed answers included, in arrival order. */
  received: Received[];
  close(): Promise<void>;
}

/** Starts a webhook receiver; `statusFor(n)` picks the answer for the n-th request (0-based), default 200. */
export async function startReceiver(statusFor: (n: number) => number = () => 200): Promise<Receiver> {
  const received: Received[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks).toString('utf8');
      const n = received.length;
      received.push({ headers: req.headers, raw, event: JSON.parse(raw) as Received['event'] });
      res.writeHead(statusFor(n)).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hooks`,
    received,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
