import type { LookupFunction } from 'node:net';
import { ErrorType } from '../../src/domain/errors';
import { HttpClient, type HttpClientOptions } from '../../src/providers/http';
import { ProviderPaymentSchema } from '../../src/providers/schemas';
import {
  blackholeServer,
  closedPort,
  eventually,
  fixedHttpServer,
  providerFailure,
  rawResponseServer,
  silentLogger,
  silentServer,
} from './net-helpers';

// Transport situations the simulator cannot produce, on raw 127.0.0.1 servers. The question each test answers: did the
// request leave (OutcomeUnknown) or provably not (NotSent)? And: the client never tries twice.

const clients: HttpClient[] = [];
const cleanups: (() => Promise<void>)[] = [];

afterEach(async () => {
  await Promise.all(clients.splice(0).map((c) => c.close()));
  await Promise.all(cleanups.splice(0).map((c) => c()));
});

const client = (baseUrl: string, options: Partial<HttpClientOptions> = {}): HttpClient => {
  const c = new HttpClient({
    baseUrl,
    connectTimeoutMs: 1000,
    totalTimeoutMs: 2000,
    logger: silentLogger(),
    ...options,
  });
  clients.push(c);
  return c;
};

const post = {
  method: 'POST',
  path: '/v1/payments',
  operation: 'create',
  json: { amount: 1 },
  idempotencyKey: 'k1',
} as const;

const payment = {
  id: 'pay_1',
  status: 'succeeded',
  amount: 100,
  amount_captured: 100,
  amount_refunded: 0,
  currency: 'EUR',
  reference: 'order-1',
  created: 1_700_000_000,
};

const failingLookup =
  (code: string): LookupFunction =>
  (hostname, _options, callback) => {
    const err = Object.assign(new Error(`getaddrinfo ${code} ${hostname}`), { code, hostname });
    callback(err, '', 4);
  };

describe('before the request leaves: NotSent', () => {
  it('connection refused on a closed port', async () => {
    const port = await closedPort();
    const e = await providerFailure(client(`http://127.0.0.1:${port}`).send(post));
    expect(e.type).toBe(ErrorType.NotSent);
    expect(e.details).toEqual({ type: ErrorType.NotSent, operation: 'create', reason: 'connect_refused' });
  });

  it.each(['ENOTFOUND', 'EAI_AGAIN'])('DNS failure %s', async (code) => {
    const c = client('http://payments.provider.invalid:4010', { connect: { lookup: failingLookup(code) } });
    const e = await providerFailure(c.send(post));
    expect(e.type).toBe(ErrorType.NotSent);
    expect(e.details.reason).toBe('dns');
  });

  it('connect timeout: a port whose accept queue is full never completes the handshake', async () => {
    const server = await blackholeServer();
    cleanups.push(() => server.close());
    const started = Date.now();
    const e = await providerFailure(client(server.url, { connectTimeoutMs: 100, totalTimeoutMs: 5000 }).send(post));
    expect(e.type).toBe(ErrorType.NotSent);
    expect(e.details.reason).toBe('connect_timeout');
    expect((e.cause as { code?: string }).code).toBe('UND_ERR_CONNECT_TIMEOUT');
    // undici's connect timer ticks every ~0.5 s, so 100 ms fires within about a second.
    expect(Date.now() - started).toBeLessThan(2500);
  });

  it('the total deadline firing while still connecting is NotSent, not OutcomeUnknown', async () => {
    const server = await blackholeServer();
    cleanups.push(() => server.close());
    const started = Date.now();
    const e = await providerFailure(client(server.url, { connectTimeoutMs: 5000, totalTimeoutMs: 150 }).send(post));
    expect(Date.now() - started).toBeLessThan(1000);
    expect(e.type).toBe(ErrorType.NotSent);
    expect(e.details.reason).toBe('connect_timeout');
    expect((e.cause as Error).name).toBe('TimeoutError');
  });

  it('the deadline firing while queued behind a busy connection is NotSent; the one on the wire is OutcomeUnknown', async () => {
    const server = await silentServer();
    cleanups.push(() => server.close());
    const c = client(server.url, { connections: 1 });
    const [first, second] = await Promise.all([
      providerFailure(c.send({ ...post, totalTimeoutMs: 400 })),
      providerFailure(c.send({ ...post, totalTimeoutMs: 100 })),
    ]);
    expect(first.type).toBe(ErrorType.OutcomeUnknown);
    expect(first.details.reason).toBe('timeout_after_send');
    expect(second.type).toBe(ErrorType.NotSent);
    // The queued request is still dispatched once the first socket is gone: onto a fresh connection, where undici
    // aborts it before writing a byte.
    await eventually(() => server.connections() === 2 && server.open() === 0);
    expect(server.requests()).toBe(1);
  });
});

describe('after the request left: OutcomeUnknown', () => {
  it('total timeout after send (a server that accepts and never answers), sent exactly once', async () => {
    const server = await silentServer();
    cleanups.push(() => server.close());
    const e = await providerFailure(client(server.url, { totalTimeoutMs: 200 }).send(post));
    expect(e.type).toBe(ErrorType.OutcomeUnknown);
    expect(e.details.reason).toBe('timeout_after_send');
    expect(server.requests()).toBe(1);
  });

  it('headers timeout after send', async () => {
    const server = await silentServer();
    cleanups.push(() => server.close());
    const e = await providerFailure(client(server.url, { headersTimeoutMs: 100, totalTimeoutMs: 5000 }).send(post));
    expect(e.type).toBe(ErrorType.OutcomeUnknown);
    expect(e.details.reason).toBe('timeout_after_send');
    expect((e.cause as { code?: string }).code).toBe('UND_ERR_HEADERS_TIMEOUT');
    expect(server.requests()).toBe(1);
  });

  it('body timeout: headers then a stalled body', async () => {
    const server = await rawResponseServer('HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n{"id":', { stall: true });
    cleanups.push(() => server.close());
    const e = await providerFailure(client(server.url, { bodyTimeoutMs: 100, totalTimeoutMs: 5000 }).send(post));
    expect(e.type).toBe(ErrorType.OutcomeUnknown);
    expect(e.details.reason).toBe('timeout_after_send');
    expect((e.cause as { code?: string }).code).toBe('UND_ERR_BODY_TIMEOUT');
  });

  it('total deadline while reading a stalled body', async () => {
    const server = await rawResponseServer('HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n{"id":', { stall: true });
    cleanups.push(() => server.close());
    const e = await providerFailure(client(server.url, { totalTimeoutMs: 200 }).send(post));
    expect(e.type).toBe(ErrorType.OutcomeUnknown);
    expect(e.details.reason).toBe('timeout_after_send');
  });

  it.each([
    ['no response at all', ''],
    ['half the status line', 'HTTP/1.1 20'],
    ['headers then half the body', 'HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n{"id":'],
  ])('reset after send: %s', async (_name, raw) => {
    const server = await rawResponseServer(raw);
    cleanups.push(() => server.close());
    const e = await providerFailure(client(server.url).send(post));
    expect(e.type).toBe(ErrorType.OutcomeUnknown);
    expect(e.details.reason).toBe('reset_after_send');
    expect(server.requests()).toBe(1);
  });
});

describe('answers', () => {
  it('a 2xx that parses is a value, with status, headers and duration', async () => {
    const server = await fixedHttpServer(200, JSON.stringify(payment), { 'idempotent-replayed': 'true' });
    cleanups.push(() => server.close());
    const result = await client(server.url).call(post, ProviderPaymentSchema);
    expect(result.kind).toBe('ok');
    if (result.kind !== 'ok') return;
    expect(result.value).toEqual({
      id: 'pay_1',
      status: 'succeeded',
      amount: 100,
      amountCaptured: 100,
      amountRefunded: 0,
      currency: 'EUR',
      reference: 'order-1',
      created: 1_700_000_000,
    });
    expect(result.response.status).toBe(200);
    expect(result.response.headers['idempotent-replayed']).toBe('true');
    expect(result.response.durationMs).toBeGreaterThanOrEqual(0);
  });

  it.each([
    ['not json', 'not json'],
    ['{} (valid JSON, not a payment)', '{}'],
    ['an empty body', ''],
  ])('an unparseable 2xx is OutcomeUnknown: %s', async (_name, body) => {
    const server = await fixedHttpServer(200, body);
    cleanups.push(() => server.close());
    const e = await providerFailure(client(server.url).call(post, ProviderPaymentSchema));
    expect(e.type).toBe(ErrorType.OutcomeUnknown);
    expect(e.details).toMatchObject({ status: 200, reason: 'unparseable' });
    expect(server.requests()).toBe(1);
  });

  it('follows no redirect: a 3xx is an answer we cannot act on (OutcomeUnknown), sent once', async () => {
    const server = await fixedHttpServer(307, '', { location: '/v2/payments' });
    cleanups.push(() => server.close());
    const e = await providerFailure(client(server.url).call(post, ProviderPaymentSchema));
    expect(e.type).toBe(ErrorType.OutcomeUnknown);
    expect(e.details.status).toBe(307);
    expect(server.requests()).toBe(1);
  });

  it('a base URL path prefix is kept', async () => {
    const server = await fixedHttpServer(200, JSON.stringify(payment));
    cleanups.push(() => server.close());
    const result = await client(`${server.url}/prefix/`).call(post, ProviderPaymentSchema);
    expect(result.kind).toBe('ok');
    expect(server.paths()).toEqual(['/prefix/v1/payments']);
  });
});
