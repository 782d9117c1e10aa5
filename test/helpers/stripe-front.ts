/**
 * A Stripe front for whole-stack tests: a tiny HTTP server on 127.0.0.1 that the Stripe adapter is pointed at
 * (`STRIPE_API_BASE`). It records every request exactly as the adapter sent it (method, path, query, headers, form
 * body), then lets the test decide the answer: forwarded verbatim to a stripe-mock (which validates the request against
 * Stripe's OpenAPI spec and answers from its fixtures), or one of the recorded Stripe error answers in
 * test/providers/fixtures/stripe/ (what stripe-mock cannot produce: declines, 5xx, ...).
 */
import { readFileSync, readdirSync } from 'node:fs';
import { type IncomingMessage, type Server, type ServerResponse, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';

/** One request as the adapter sent it. */
export interface FrontRequest {
  readonly method: string;
  /** Path without the query string. */
  readonly path: string;
  readonly query: URLSearchParams;
  /** Lower-case names, as Node gives them. */
  readonly headers: IncomingMessage['headers'];
  /** The form-encoded body, parsed (`metadata[merchant_id]`, `amount`, ...). */
  readonly form: URLSearchParams;
  readonly body: string;
}

/** An HTTP answer. */
export interface FrontAnswer {
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: string;
}

/** A recorded Stripe answer (test/providers/fixtures/stripe/*.json). */
export interface RecordedAnswer {
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: unknown;
}

const recordedDir = path.join(__dirname, '..', 'providers', 'fixtures', 'stripe');

/** The recorded Stripe answers by file name (`card-declined`, `api-error-500`, ...). */
export const recordedStripeAnswers: Readonly<Record<string, RecordedAnswer>> = Object.fromEntries(
  readdirSync(recordedDir).map((f) => [
    f.replace(/\.json$/, ''),
    JSON.parse(readFileSync(path.join(recordedDir, f), 'utf8')) as RecordedAnswer,
  ]),
);

/** A recorded answer, as the front sends it. */
export function recorded(name: string): FrontAnswer {
  const r = recordedStripeAnswers[name];
  if (r === undefined) throw new Error(`no recorded Stripe answer ${name}`);
  return {
    status: r.status,
    headers: { 'content-type': 'application/json', ...r.headers },
    body: JSON.stringify(r.body),
  };
}

/** Decides one answer; `forward(base)` sends the request unchanged to the server at `base` (a stripe-mock). */
export type FrontHandler = (
  request: FrontRequest,
  forward: (base: string) => Promise<FrontAnswer>,
) => Promise<FrontAnswer> | FrontAnswer;

export interface StripeFront {
  /** `http://127.0.0.1:<port>`: the adapter's `STRIPE_API_BASE`. */
  readonly url: string;
  /** Every request so far, oldest first, with the status it was answered. */
  readonly seen: (FrontRequest & { readonly answeredStatus: number; readonly answeredBody: string })[];
  close(): Promise<void>;
}

// Not forwarded: they describe this hop, not the request.
const hopByHop = new Set(['host', 'connection', 'content-length', 'transfer-encoding', 'keep-alive']);

async function forwardTo(base: string, request: FrontRequest): Promise<FrontAnswer> {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(request.headers)) {
    if (value !== undefined && !hopByHop.has(name)) headers[name] = Array.isArray(value) ? value.join(', ') : value;
  }
  const query = request.query.toString();
  const res = await fetch(`${base}${request.path}${query ? `?${query}` : ''}`, {
    method: request.method,
    headers,
    ...(request.method === 'GET' || request.method === 'DELETE' ? {} : { body: request.body }),
    signal: AbortSignal.timeout(10_000),
  });
  const answerHeaders: Record<string, string> = {};
  for (const name of ['content-type', 'request-id', 'idempotency-key', 'idempotent-replayed', 'stripe-mock-version']) {
    const value = res.headers.get(name);
    if (value !== null) answerHeaders[name] = value;
  }
  return { status: res.status, headers: answerHeaders, body: await res.text() };
}

/** Starts the front on a free port of 127.0.0.1. */
export async function startStripeFront(handler: FrontHandler): Promise<StripeFront> {
  const seen: StripeFront['seen'] = [];
  const respond = async (req: IncomingMessage, res: ServerResponse, body: string) => {
    const url = new URL(req.url ?? '/', 'http://front');
    const request: FrontRequest = {
      method: req.method ?? 'GET',
      path: url.pathname,
      query: url.searchParams,
      headers: req.headers,
      form: new URLSearchParams(body),
      body,
    };
    let answer: FrontAnswer;
    try {
      answer = await handler(request, (base) => forwardTo(base, request));
    } catch (err) {
      // A bug of the test's handler: a plain 599 the adapter classifies as unknown, and the log says why.
      answer = { status: 599, headers: { 'content-type': 'text/plain' }, body: String(err) };
    }
    seen.push({ ...request, answeredStatus: answer.status, answeredBody: answer.body });
    res.writeHead(answer.status, answer.headers);
    res.end(answer.body);
  };
  const server: Server = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => (body += chunk));
    req.on('end', () => void respond(req, res, body));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    seen,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
