import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type { TcpNetConnectOpts } from 'node:net';
import { Pool, type Dispatcher } from 'undici';
import { z } from 'zod';
import {
  NotSentError,
  OutcomeUnknownError,
  ProviderRejectedError,
  ProviderUnavailableError,
  isProviderError,
  type ProviderError,
} from './errors';
import { defaultMaxRetryAfterMs } from '../domain/retry-policy';
import { defaultProviderLogger, keyHash, logAttempt, stripQuery, type Logger } from './logging';

/** `{ error: { type, code, decline_code?, message } }` of a non-2xx answer (Stripe's shape). */
export const ProviderErrorBody = z.object({
  error: z.object({
    type: z.string().optional(),
    code: z.string().optional(),
    /** On a `card_error`: why the issuer declined (`insufficient_funds`, ...); `code` is then `card_declined`. */
    decline_code: z.string().optional(),
    message: z.string().optional(),
  }),
});

export type HttpHeaders = Readonly<Record<string, string | string[] | undefined>>;

/** What the wire gave back; the body is read in full before this is returned. */
export interface HttpResponse {
  readonly status: number;
  readonly headers: HttpHeaders;
  readonly body: string;
  readonly durationMs: number;
}

export interface HttpRequest {
  readonly method: 'GET' | 'POST' | 'DELETE';
  /** Path and query, relative to the base URL's origin. */
  readonly path: string;
  /** Route template for the log (`/v1/payments/:id/capture`); default: the path without its query. */
  readonly route?: string;
  /** Operation name carried by every failure (`create`, `capture`, `lookup`, ...). */
  readonly operation: string;
  /** Serialized as JSON. */
  readonly json?: unknown;
  /** A body already serialized by the caller (e.g. an SDK's form encoding); its content type goes in `headers`. */
  readonly body?: string;
  readonly idempotencyKey?: string;
  /** A key that is not sent as a header but whose hash the log should carry (a lookup by key). */
  readonly logKey?: string;
  /** Sent as `Request-Id`; generated when absent. */
  readonly requestId?: string;
  /** Temporal activity attempt number; logged only. */
  readonly attempt?: number;
  /** Extra headers (never logged). */
  readonly headers?: Readonly<Record<string, string>>;
  /** This call's deadline instead of the client's `totalTimeoutMs`. */
  readonly totalTimeoutMs?: number;
  /** The caller's cancellation (an activity's): aborting it ends the call, classified like the deadline. */
  readonly signal?: AbortSignal;
}

export interface HttpClientOptions {
  /** Origin (and optional path prefix) of the provider API, e.g. `http://127.0.0.1:4010`. */
  readonly baseUrl: string;
  /**
   * Limit for establishing the TCP (and TLS) connection; past it the request provably never left. undici runs this and
   * the headers/body idle timeouts on a coarse timer (about 0.5 s ticks); the total deadline is exact.
   */
  readonly connectTimeoutMs: number;
  /** Deadline for the whole call: queueing, connect, send, headers and body. */
  readonly totalTimeoutMs: number;
  /** Idle limit while waiting for response headers; default: the total timeout. */
  readonly headersTimeoutMs?: number;
  /** Idle limit between body chunks; default: the total timeout. */
  readonly bodyTimeoutMs?: number;
  /** Concurrent connections to the provider (the bulkhead per provider); default 16. */
  readonly connections?: number;
  /** Extra socket options for undici's connector (e.g. a `lookup` function); the connect timeout is always ours. */
  readonly connect?: Omit<TcpNetConnectOpts, 'timeout' | 'port' | 'host'>;
  /** Headers sent on every request, e.g. Authorization (never logged). */
  readonly defaultHeaders?: Readonly<Record<string, string>>;
  /** The longest Retry-After taken from an answer (`PROVIDER_MAX_RETRY_AFTER_MS`); default {@link defaultMaxRetryAfterMs}. */
  readonly maxRetryAfterMs?: number;
  /** Provider name for the log. */
  readonly name?: string;
  readonly logger?: Logger;
  /** The clock: `now` (ms, monotonic) for durations, `deadline(ms)` for a call's total deadline. Tests inject both. */
  readonly clock?: HttpClock;
}

/** What the client reads time from. */
export interface HttpClock {
  /** Milliseconds on a monotonic clock. Default `performance.now()`. */
  now(): number;
  /** A signal that aborts (with a `TimeoutError`) after `ms`. Default `AbortSignal.timeout(ms)`. */
  deadline(ms: number): AbortSignal;
}

const systemClock: HttpClock = {
  now: () => performance.now(),
  deadline: (ms) => AbortSignal.timeout(ms),
};

/** A classified answer: a value, or a decline (an answer too: the provider said no and nothing happened). */
export type Classified<T> =
  { readonly kind: 'ok'; readonly value: T } | { readonly kind: 'declined'; readonly code: string };

export interface ClassifyOptions {
  readonly operation: string;
  /** Whether a 402 `card_error` is a decline value (payment creation) rather than a rejection. */
  readonly declines?: boolean;
  /** Clock for HTTP-date Retry-After values; default `Date.now()`. */
  readonly nowMs?: number;
  /** The longest Retry-After taken; default {@link defaultMaxRetryAfterMs}. */
  readonly maxRetryAfterMs?: number;
}

/** Case-insensitive single header value (the first, when repeated). */
export const headerValue = (headers: HttpHeaders, name: string): string | undefined => {
  const wanted = name.toLowerCase();
  for (const [key, value] of Object.entries(headers)) {
    if (key.toLowerCase() === wanted) return Array.isArray(value) ? value[0] : value;
  }
  return undefined;
};

/**
 * Retry-After as milliseconds from now, at most `maxMs`: delta-seconds (`120`) or an HTTP-date (relative to `nowMs`, a
 * date in the past gives 0). Absent or unreadable: undefined, and the caller falls back to its own backoff.
 */
export const parseRetryAfter = (
  value: string | undefined,
  nowMs: number = Date.now(),
  maxMs: number = defaultMaxRetryAfterMs,
): number | undefined => {
  const asked = askedRetryAfterMs(value, nowMs);
  return asked === undefined ? undefined : Math.min(asked, maxMs);
};

const askedRetryAfterMs = (value: string | undefined, nowMs: number): number | undefined => {
  if (value === undefined) return undefined;
  const v = value.trim();
  if (/^\d+$/.test(v)) return Number(v) * 1000;
  // Only something that looks like a date goes to Date.parse, which would otherwise read "-1" or "5" as a year.
  if (!/[a-z]{3}/i.test(v)) return undefined;
  const at = Date.parse(v);
  if (Number.isNaN(at)) return undefined;
  return Math.max(0, at - nowMs);
};

const parseJson = (text: string): { ok: true; value: unknown } | { ok: false; error: unknown } => {
  try {
    return { ok: true, value: JSON.parse(text) as unknown };
  } catch (error) {
    return { ok: false, error };
  }
};

/** `error.type`, `error.code` and `error.decline_code` of a provider error body, when it has them. */
export const errorCodeOf = (
  body: string,
): { readonly type?: string; readonly code?: string; readonly decline_code?: string } => {
  const json = parseJson(body);
  if (!json.ok) return {};
  const parsed = ProviderErrorBody.safeParse(json.value);
  return parsed.success ? parsed.data.error : {};
};

/**
 * The response half of the outcome classes (docs/architecture.md#outcome-classes): an answer becomes a value or exactly one failure class.
 *
 * | status | result |
 * |---|---|
 * | 2xx, body parses with `schema` | `{ kind: 'ok', value }` |
 * | 2xx, body does not parse | OutcomeUnknown `unparseable` |
 * | 402 `card_error` (with `declines`) | `{ kind: 'declined', code }` (`decline_code`, else `code`) |
 * | 408 | OutcomeUnknown `status` |
 * | 409 (`idempotency_key_in_use`, or any concurrent-use conflict), 429, 503 | ProviderUnavailable, `retryAfterMs` (capped) |
 * | other 4xx (incl. 422 `idempotency_key_mismatch`) | ProviderRejected with `code` |
 * | 500, 502, 504, other 5xx, 1xx/3xx | OutcomeUnknown `status` |
 */
export const classifyResponse = <S extends z.ZodType>(
  status: number,
  headers: HttpHeaders,
  body: string,
  schema: S,
  options: ClassifyOptions,
): Classified<z.output<S>> => {
  const { operation } = options;
  if (status >= 200 && status < 300) {
    const json = parseJson(body);
    if (!json.ok) throw new OutcomeUnknownError({ operation, status, reason: 'unparseable' }, { cause: json.error });
    const parsed = schema.safeParse(json.value);
    if (!parsed.success) {
      throw new OutcomeUnknownError({ operation, status, reason: 'unparseable' }, { cause: parsed.error });
    }
    return { kind: 'ok', value: parsed.data };
  }
  const error = errorCodeOf(body);
  const code = error.code ?? error.type;
  // A replayed answer is the provider's answer about the key's first request, not about this one.
  const replayed = headerValue(headers, 'idempotent-replayed') === 'true';
  const withCode = { ...(code === undefined ? {} : { code }), ...(replayed ? { replayed } : {}) };
  if (status === 402 && options.declines === true && error.type === 'card_error') {
    return { kind: 'declined', code: error.decline_code ?? error.code ?? 'card_declined' };
  }
  if (status === 409 || status === 429 || status === 503) {
    // 409 is concurrent use (`idempotency_key_in_use`, or a lock on the object): the same request later will work.
    const retryAfterMs = parseRetryAfter(
      headerValue(headers, 'retry-after'),
      options.nowMs ?? Date.now(),
      options.maxRetryAfterMs,
    );
    throw new ProviderUnavailableError({
      operation,
      status,
      ...withCode,
      ...(retryAfterMs === undefined ? {} : { retryAfterMs }),
      reason: 'status',
    });
  }
  if (status >= 400 && status < 500 && status !== 408) {
    throw new ProviderRejectedError({ operation, status, ...withCode, reason: 'status' });
  }
  // 408 (the server gave up reading: it may have acted on what it had), every 5xx (500/502/504: a proxy or the provider
  // failed mid-way), and 1xx/3xx, which a provider API never answers on purpose (we follow no redirects).
  throw new OutcomeUnknownError({ operation, status, ...withCode, reason: 'status' });
};

const errorCodes = (err: unknown): string[] => {
  if (typeof err !== 'object' || err === null) return [];
  const own = (err as { code?: unknown }).code;
  const nested = err instanceof AggregateError ? err.errors.flatMap(errorCodes) : [];
  const cause = 'cause' in err && err.cause !== err ? errorCodes(err.cause) : [];
  return [...(typeof own === 'string' ? [own] : []), ...nested, ...cause];
};

const dnsCodes = new Set(['ENOTFOUND', 'EAI_AGAIN', 'EAI_NONAME', 'EAI_FAIL', 'EAI_NODATA']);
const timeoutCodes = new Set(['UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT']);

/**
 * The transport half of the classification. `sent` says whether undici had handed this request to a connected socket
 * (see {@link trackSend}); `deadlineExpired` whether our total deadline fired; `cancelled` whether the caller's signal
 * aborted the call (an activity cancelled or timed out).
 */
export const classifyTransportError = (
  err: unknown,
  ctx: {
    readonly operation: string;
    readonly sent: boolean;
    readonly deadlineExpired: boolean;
    readonly cancelled?: boolean;
  },
): ProviderError => {
  if (isProviderError(err)) return err;
  const { operation } = ctx;
  const codes = errorCodes(err);
  const cancelled = ctx.cancelled === true && !ctx.deadlineExpired;
  if (!ctx.sent) {
    const reason = cancelled
      ? 'cancelled'
      : codes.includes('ECONNREFUSED')
        ? 'connect_refused'
        : codes.some((c) => dnsCodes.has(c))
          ? 'dns'
          : codes.includes('UND_ERR_CONNECT_TIMEOUT') || ctx.deadlineExpired
            ? 'connect_timeout'
            : 'not_sent';
    return new NotSentError({ operation, reason }, { cause: err });
  }
  const timedOut = ctx.deadlineExpired || codes.some((c) => timeoutCodes.has(c));
  return new OutcomeUnknownError(
    { operation, reason: cancelled ? 'cancelled_after_send' : timedOut ? 'timeout_after_send' : 'reset_after_send' },
    { cause: err },
  );
};

/**
 * An interceptor that records, for one request, whether it was ever handed to a connected socket.
 *
 * Why this and not diagnostics_channel (`undici:client:connected` / `undici:client:sendHeaders`): those channels are
 * process-wide and report connections, not our request; a reused keep-alive socket fires no `connected` at all, and
 * correlating `sendHeaders` messages back to one call needs a marker header and global state. undici calls the
 * handler's `onRequestStart` for exactly this request, right before it writes the request line to a socket that is
 * already connected (client-h1 `writeH1`), and never before. If the request was aborted meanwhile (our deadline fired
 * while it was queued or connecting), undici's request handler aborts it inside that same callback and nothing is
 * written: the controller then reports `aborted`, and the request does not count as sent. So:
 * - error before a non-aborted `onRequestStart` (refused, DNS, connect timeout, our deadline while queued or
 *   connecting): the request provably never left: NotSent;
 * - error after it (reset, headers/body timeout, our deadline): the provider may have it: OutcomeUnknown. Nothing runs
 *   between the callback and the write, and a written request may still not have arrived: this errs only to caution.
 */
export const trackSend =
  (state: { sent: boolean }): Dispatcher.DispatcherComposeInterceptor =>
  (dispatch) =>
  (opts, handler) =>
    dispatch(opts, {
      onRequestStart(controller, context) {
        handler.onRequestStart?.(controller, context);
        if (!controller.aborted) state.sent = true;
      },
      onRequestUpgrade(controller, statusCode, headers, socket) {
        handler.onRequestUpgrade?.(controller, statusCode, headers, socket);
      },
      onResponseStart(controller, statusCode, headers, statusMessage) {
        handler.onResponseStart?.(controller, statusCode, headers, statusMessage);
      },
      onResponseData(controller, chunk) {
        handler.onResponseData?.(controller, chunk);
      },
      onResponseEnd(controller, trailers) {
        handler.onResponseEnd?.(controller, trailers);
      },
      onResponseError(controller, error) {
        handler.onResponseError?.(controller, error);
      },
    });

/** A promise that rejects with the signal's reason when it aborts; `dispose` removes the listener. */
const untilAborted = (signal: AbortSignal): { promise: Promise<never>; dispose: () => void } => {
  let listener: (() => void) | undefined;
  const promise = new Promise<never>((_, reject) => {
    listener = () => reject(signal.reason);
    signal.addEventListener('abort', listener, { once: true });
  });
  return { promise, dispose: () => listener && signal.removeEventListener('abort', listener) };
};

/**
 * HTTP client for one provider base URL: one undici Pool, a connect timeout, a total deadline per call, and
 * classification of every failure. It never retries: no retry interceptor, no redirect interceptor (undici 7 follows no
 * redirects without one), one pipelined request per connection. Temporal's retry policy is the only retry layer.
 */
export class HttpClient {
  readonly #pool: Pool;
  readonly #prefix: string;
  readonly #options: HttpClientOptions;
  readonly #logger: Logger;
  readonly #clock: HttpClock;

  constructor(options: HttpClientOptions) {
    const url = new URL(options.baseUrl);
    this.#prefix = url.pathname.replace(/\/+$/, '');
    this.#options = options;
    this.#clock = options.clock ?? systemClock;
    this.#logger = options.logger ?? defaultProviderLogger();
    this.#pool = new Pool(url.origin, {
      connections: options.connections ?? 16,
      // More than one request in flight per socket would turn one reset into several unknown outcomes.
      pipelining: 1,
      connect: { ...options.connect, timeout: options.connectTimeoutMs },
      headersTimeout: options.headersTimeoutMs ?? options.totalTimeoutMs,
      bodyTimeout: options.bodyTimeoutMs ?? options.totalTimeoutMs,
    });
  }

  /**
   * One HTTP exchange, body read in full. Resolves with any status (classification is {@link classifyResponse}'s job);
   * rejects only with a {@link ProviderError}: NotSent when the request never left, OutcomeUnknown when it did.
   */
  async send(req: HttpRequest): Promise<HttpResponse> {
    const { signal: cancel } = req;
    // Cancelled before we began: nothing is sent (undici would refuse it too, but say why).
    if (cancel?.aborted)
      throw new NotSentError({ operation: req.operation, reason: 'cancelled' }, { cause: cancel.reason });
    const state = { sent: false };
    const deadline = this.#clock.deadline(req.totalTimeoutMs ?? this.#options.totalTimeoutMs);
    const signal = cancel === undefined ? deadline : AbortSignal.any([deadline, cancel]);
    const startedAt = this.#clock.now();
    const exchange = (async (): Promise<HttpResponse> => {
      const res = await this.#pool.compose(trackSend(state)).request(this.#requestOptions(req, signal));
      const body = await res.body.text();
      return { status: res.statusCode, headers: res.headers, body, durationMs: this.#elapsed(startedAt) };
    })();
    // undici only records an abort for a request that is still queued or connecting, and acts on it when a socket is
    // ready (it then aborts before writing). The deadline and the cancellation must hold while connecting too, so we
    // also race them; the request left behind can no longer be written, and its late settlement is ignored.
    exchange.catch(() => undefined);
    const expired = untilAborted(signal);
    try {
      return await Promise.race([exchange, expired.promise]);
    } catch (err) {
      throw classifyTransportError(err, {
        operation: req.operation,
        sent: state.sent,
        deadlineExpired: deadline.aborted,
        cancelled: cancel?.aborted === true,
      });
    } finally {
      expired.dispose();
    }
  }

  #elapsed(startedAt: number): number {
    return Math.round(this.#clock.now() - startedAt);
  }

  #requestOptions(req: HttpRequest, signal: AbortSignal): Dispatcher.RequestOptions {
    const headers: Record<string, string> = {
      accept: 'application/json',
      ...this.#options.defaultHeaders,
      ...req.headers,
      'request-id': req.requestId ?? `req_${randomUUID()}`,
    };
    if (req.idempotencyKey !== undefined) headers['idempotency-key'] = req.idempotencyKey;
    if (req.json !== undefined) headers['content-type'] = 'application/json';
    return {
      method: req.method,
      path: this.#prefix + req.path,
      headers,
      body: req.json === undefined ? req.body : JSON.stringify(req.json),
      signal,
    };
  }

  /** {@link send} then {@link classifyResponse}, with exactly one attempt log line whatever happens. */
  async call<S extends z.ZodType>(
    req: HttpRequest,
    schema: S,
    options: Omit<ClassifyOptions, 'operation'> = {},
  ): Promise<Classified<z.output<S>> & { readonly response: HttpResponse }> {
    const requestId = req.requestId ?? `req_${randomUUID()}`;
    const startedAt = this.#clock.now();
    const loggedKey = req.idempotencyKey ?? req.logKey;
    const base = {
      provider: this.#options.name ?? new URL(this.#options.baseUrl).host,
      operation: req.operation,
      method: req.method,
      route: req.route ?? stripQuery(req.path),
      requestId,
      ...(loggedKey === undefined ? {} : { keyHash: keyHash(loggedKey) }),
      ...(req.attempt === undefined ? {} : { attempt: req.attempt }),
    };
    let response: HttpResponse | undefined;
    try {
      response = await this.send({ ...req, requestId });
      const { maxRetryAfterMs } = this.#options;
      const result = classifyResponse(response.status, response.headers, response.body, schema, {
        ...(maxRetryAfterMs === undefined ? {} : { maxRetryAfterMs }),
        ...options,
        operation: req.operation,
      });
      logAttempt(this.#logger, {
        ...base,
        status: response.status,
        outcome: result.kind === 'ok' ? 'succeeded' : 'declined',
        ...(result.kind === 'declined' ? { code: result.code } : {}),
        ...(headerValue(response.headers, 'idempotent-replayed') === 'true' ? { replayed: true } : {}),
        durationMs: response.durationMs,
      });
      return { ...result, response };
    } catch (err) {
      const failure = isProviderError(err)
        ? err
        : new OutcomeUnknownError({ operation: req.operation, reason: 'client_error' }, { cause: err });
      const { status, code, retryAfterMs, reason, replayed } = failure.details;
      logAttempt(this.#logger, {
        ...base,
        ...(status === undefined ? {} : { status }),
        outcome: failure.type,
        reason,
        ...(code === undefined ? {} : { code }),
        ...(retryAfterMs === undefined ? {} : { retryAfterMs }),
        ...(replayed === true ? { replayed } : {}),
        durationMs: response?.durationMs ?? this.#elapsed(startedAt),
      });
      throw failure;
    }
  }

  /** Destroys the pool: in-flight calls fail (as OutcomeUnknown when already sent). */
  async close(): Promise<void> {
    await this.#pool.destroy();
  }
}
