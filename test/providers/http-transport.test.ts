import diagnostics from 'node:diagnostics_channel';
import type { LookupFunction } from 'node:net';
import { ErrorType } from '../../src/domain/errors';
import { HttpClient, type HttpClientOptions, type HttpClock } from '../../src/providers/http';
import { ProviderPaymentSchema } from '../../src/providers/rest/wire';
import {
  blackholeServer,
  fixedHttpServer,
  providerFailure,
  rawResponseServer,
  silentLogger,
  silentServer,
} from './net-helpers';
import { eventually } from '../helpers/eventually';
import { refusedPort } from '../helpers/net';

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

/** Resolves when undici starts connecting to `port` (its process-wide `beforeConnect` channel). */
const connecting = (port: number): Promise<void> =>
  new Promise((resolve) => {
    const channel = diagnostics.channel('undici:client:beforeConnect');
    const onMessage = (message: unknown) => {
      if (String((message as { connectParams?: { port?: unknown } }).connectParams?.port) !== String(port)) return;
      channel.unsubscribe(onMessage);
      resolve();
    };
    channel.subscribe(onMessage);
  });

/** A clock whose deadlines fire only when the test says so; it records every deadline the client asked for. */
const manualDeadlines = (now: () => number = () => 0) => {
  const requested: number[] = [];
  const controllers: AbortController[] = [];
  const clock: HttpClock = {
    now,
    deadline: (ms) => {
      requested.push(ms);
      const c = new AbortController();
      controllers.push(c);
      return c.signal;
    },
  };
  const fire = () => {
    for (const c of controllers) c.abort(new DOMException('The operation was aborted due to timeout', 'TimeoutError'));
  };
  return { clock, requested, fire };
};

const failingLookup =
  (code: string): LookupFunction =>
  (hostname, _options, callback) => {
    const err = Object.assign(new Error(`getaddrinfo ${code} ${hostname}`), { code, hostname });
    callback(err, '', 4);
  };

describe('before the request leaves: NotSent', () => {
  it('connection refused on a closed port', async () => {
    const port = await refusedPort();
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
    // Our total deadline never fires here: only the connect timeout can end this call (undici's error code says so).
    const { clock } = manualDeadlines();
    const e = await providerFailure(client(server.url, { connectTimeoutMs: 100, clock }).send(post));
    expect(e.type).toBe(ErrorType.NotSent);
    expect(e.details.reason).toBe('connect_timeout');
    expect((e.cause as { code?: string }).code).toBe('UND_ERR_CONNECT_TIMEOUT');
  });

  it('the total deadline firing while still connecting is NotSent, not OutcomeUnknown', async () => {
    const server = await blackholeServer();
    cleanups.push(() => server.close());
    const { clock, requested, fire } = manualDeadlines();
    const started = connecting(server.port);
    const call = providerFailure(
      client(server.url, { connectTimeoutMs: 60_000, totalTimeoutMs: 150, clock }).send(post),
    );
    expect(requested).toEqual([150]);
    await started; // the handshake is under way, and cannot complete
    fire();
    const e = await call;
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
    await eventually('two connections, both closed', () => server.connections() === 2 && server.open() === 0, 2000);
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

describe("the caller's cancellation (an activity's signal)", () => {
  it('cancelled before the call: NotSent, nothing reaches the server', async () => {
    const server = await silentServer();
    cleanups.push(() => server.close());
    const controller = new AbortController();
    controller.abort(new Error('activity cancelled'));
    const e = await providerFailure(client(server.url).send({ ...post, signal: controller.signal }));
    expect(e.details).toEqual({ type: ErrorType.NotSent, operation: 'create', reason: 'cancelled' });
    expect(server.connections()).toBe(0);
  });

  it('cancelled while the request is on the wire: OutcomeUnknown cancelled_after_send, sent once', async () => {
    const server = await silentServer();
    cleanups.push(() => server.close());
    const controller = new AbortController();
    // Neither the total deadline nor the headers timeout can fire here: only the cancellation can end the call.
    const { clock } = manualDeadlines();
    const c = client(server.url, { clock, headersTimeoutMs: 60_000 });
    const call = providerFailure(c.send({ ...post, signal: controller.signal }));
    await eventually('one request at the server', () => server.requests() === 1, 2000);
    controller.abort(new Error('activity cancelled'));
    const e = await call;
    expect(e.type).toBe(ErrorType.OutcomeUnknown);
    expect(e.details.reason).toBe('cancelled_after_send');
    expect(server.requests()).toBe(1);
  });

  it('cancelled while still connecting: NotSent cancelled', async () => {
    const server = await blackholeServer();
    cleanups.push(() => server.close());
    const controller = new AbortController();
    const { clock } = manualDeadlines();
    const started = connecting(server.port);
    const call = providerFailure(
      client(server.url, { connectTimeoutMs: 60_000, clock }).send({ ...post, signal: controller.signal }),
    );
    await started;
    controller.abort(new Error('activity cancelled'));
    const e = await call;
    expect(e.type).toBe(ErrorType.NotSent);
    expect(e.details.reason).toBe('cancelled');
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
  });

  it('the duration is read from the injected clock', async () => {
    const server = await fixedHttpServer(200, JSON.stringify(payment));
    cleanups.push(() => server.close());
    let t = 1_000;
    const now = () => (t += 7); // every reading is 7 ms after the previous one
    const result = await client(server.url, { clock: { now, deadline: (ms) => AbortSignal.timeout(ms) } }).call(
      post,
      ProviderPaymentSchema,
    );
    // Read when the exchange starts and when its body is in: exactly one tick apart.
    expect(result.response.durationMs).toBe(7);
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
