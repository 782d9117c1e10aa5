import { ErrorType } from '../../src/domain/errors';
import {
  NotSentError,
  OutcomeUnknownError,
  ProviderError,
  ProviderRejectedError,
  ProviderUnavailableError,
  isProviderError,
  isProviderErrorOfType,
} from '../../src/providers/errors';
import { classifyResponse, classifyTransportError, headerValue, parseRetryAfter } from '../../src/providers/http';
import { configureKeyHash, keyHash, stripQuery } from '../../src/providers/logging';
import { CreatedPaymentSchema, ProviderPaymentSchema } from '../../src/providers/rest/wire';

// Pure halves of the classification; every row is also produced over real HTTP in the other provider tests.

const now = Date.parse('2030-01-01T00:00:00Z');
const payment = {
  id: 'pay_1',
  status: 'authorized',
  amount: 100,
  amount_captured: 0,
  amount_refunded: 0,
  currency: 'EUR',
  reference: 'order-1',
  created: 1,
};
const err = (code: string, type = 'invalid_request_error'): string => JSON.stringify({ error: { type, code } });

const classify = (status: number, body: string, headers: Record<string, string> = {}, declines = false) => {
  try {
    return classifyResponse(status, headers, body, ProviderPaymentSchema, {
      operation: 'create',
      declines,
      nowMs: now,
    });
  } catch (e) {
    if (isProviderError(e)) return e.details;
    throw e;
  }
};

describe('parseRetryAfter', () => {
  it.each<[string | undefined, number | undefined]>([
    ['0', 0],
    ['7', 7000],
    [' 120 ', 120_000],
    ['Tue, 01 Jan 2030 00:00:30 GMT', 30_000],
    ['Tuesday, 01-Jan-30 00:00:30 GMT', 30_000],
    ['Tue Jan  1 00:00:30 2030', 30_000],
    ['Mon, 31 Dec 2029 23:59:00 GMT', 0],
    [undefined, undefined],
    ['', undefined],
    ['-1', undefined],
    ['1.5', undefined],
    ['soon', undefined],
    ['Xyz, 99 Foo 2030 99:99:99 GMT', undefined],
  ])('%p -> %p', (value, expected) => {
    // The parsing alone: no cap in the way (the cap has its own tests below).
    expect(parseRetryAfter(value, now, Number.MAX_SAFE_INTEGER)).toBe(expected);
  });

  it('an HTTP-date defaults to now', () => {
    const inTenSeconds = new Date(Date.now() + 10_000).toUTCString();
    const ms = parseRetryAfter(inTenSeconds);
    expect(ms).toBeGreaterThan(8000);
    expect(ms).toBeLessThanOrEqual(10_000);
  });
});

describe('Retry-After cap (PROVIDER_MAX_RETRY_AFTER_MS)', () => {
  // One 429 asking for minutes (or hours) must not hold a provider, or a caller's operation, that long.
  it('a longer Retry-After is taken as the cap: delta-seconds and HTTP-date alike', () => {
    expect(parseRetryAfter('180', now, 30_000)).toBe(30_000);
    expect(parseRetryAfter('Tue, 01 Jan 2030 03:00:00 GMT', now, 30_000)).toBe(30_000);
    expect(parseRetryAfter('20', now, 30_000)).toBe(20_000);
    expect(parseRetryAfter(undefined, now, 30_000)).toBeUndefined();
  });

  it('without a setting the cap is 60 s', () => {
    expect(parseRetryAfter('7200', now)).toBe(60_000);
    expect(classify(429, err('rate_limit'), { 'retry-after': '7200' })).toMatchObject({ retryAfterMs: 60_000 });
  });

  it('classifyResponse caps what a 429 or 503 asks for at its maxRetryAfterMs', () => {
    const capped = (status: number, value: string) => {
      try {
        classifyResponse(status, { 'retry-after': value }, err('x'), ProviderPaymentSchema, {
          operation: 'capture',
          nowMs: now,
          maxRetryAfterMs: 5_000,
        });
      } catch (e) {
        if (isProviderError(e)) return e.details.retryAfterMs;
        throw e;
      }
      throw new Error('expected a failure');
    };
    expect(capped(429, '180')).toBe(5_000);
    expect(capped(503, '2')).toBe(2_000);
  });
});

describe('classifyResponse', () => {
  it('2xx that parses: a camelCase value', () => {
    expect(classify(200, JSON.stringify(payment))).toEqual({
      kind: 'ok',
      value: {
        id: 'pay_1',
        status: 'authorized',
        amount: 100,
        amountCaptured: 0,
        amountRefunded: 0,
        currency: 'EUR',
        reference: 'order-1',
        created: 1,
      },
    });
  });

  it('extra fields do not make a 2xx unparseable', () => {
    expect(classify(201, JSON.stringify({ ...payment, livemode: false }))).toMatchObject({ kind: 'ok' });
  });

  it.each([
    ['not json', 'not json'],
    ['empty', ''],
    ['{}', '{}'],
    ['a wrong type', JSON.stringify({ ...payment, amount: '100' })],
    ['an unknown status', JSON.stringify({ ...payment, status: 'pending' })],
  ])('2xx with %s: OutcomeUnknown unparseable', (_name, body) => {
    expect(classify(200, body)).toEqual({
      type: ErrorType.OutcomeUnknown,
      operation: 'create',
      status: 200,
      reason: 'unparseable',
    });
  });

  it('a create answered with a voided payment is not an answer we can act on', () => {
    const body = JSON.stringify({ ...payment, status: 'voided' });
    expect(() =>
      classifyResponse(200, {}, body, CreatedPaymentSchema, { operation: 'create', declines: true }),
    ).toThrow(OutcomeUnknownError);
  });

  it('402 card_error: a decline value when declines are expected', () => {
    expect(classify(402, err('insufficient_funds', 'card_error'), {}, true)).toEqual({
      kind: 'declined',
      code: 'insufficient_funds',
    });
    const stripeLike = { error: { type: 'card_error', code: 'card_declined', decline_code: 'do_not_honor' } };
    expect(classify(402, JSON.stringify(stripeLike), {}, true)).toEqual({ kind: 'declined', code: 'do_not_honor' });
    expect(classify(402, JSON.stringify({ error: { type: 'card_error' } }), {}, true)).toEqual({
      kind: 'declined',
      code: 'card_declined',
    });
  });

  it('402 elsewhere, or not a card_error: ProviderRejected', () => {
    expect(classify(402, err('insufficient_funds', 'card_error'))).toMatchObject({
      type: ErrorType.ProviderRejected,
      code: 'insufficient_funds',
    });
    expect(classify(402, 'payment required', {}, true)).toMatchObject({ type: ErrorType.ProviderRejected });
  });

  it.each([
    [400, err('amount_too_large'), 'amount_too_large'],
    [401, err('invalid_api_key'), 'invalid_api_key'],
    [403, '', undefined],
    [404, err('resource_missing'), 'resource_missing'],
    [422, err('idempotency_key_mismatch'), 'idempotency_key_mismatch'],
    [400, JSON.stringify({ error: { type: 'invalid_request_error' } }), 'invalid_request_error'],
  ])('%d: ProviderRejected with code %p', (status, body, code) => {
    const d = classify(status, body);
    expect(d).toMatchObject({ type: ErrorType.ProviderRejected, status, reason: 'status' });
    expect((d as { code?: string }).code).toBe(code);
  });

  it.each([
    [429, { 'retry-after': '3' }, 3000],
    [503, { 'Retry-After': '5' }, 5000],
    [503, {}, undefined],
    [503, { 'retry-after': 'Tue, 01 Jan 2030 00:00:02 GMT' }, 2000],
    [409, { 'retry-after': '1' }, 1000],
  ])('%d %p: ProviderUnavailable, retryAfterMs %p', (status, headers, retryAfterMs) => {
    const d = classify(status, err('x'), headers);
    expect(d).toMatchObject({ type: ErrorType.ProviderUnavailable, status });
    expect((d as { retryAfterMs?: number }).retryAfterMs).toBe(retryAfterMs);
  });

  it('409 idempotency_key_in_use: ProviderUnavailable with its code', () => {
    expect(classify(409, err('idempotency_key_in_use'))).toEqual({
      type: ErrorType.ProviderUnavailable,
      operation: 'create',
      status: 409,
      code: 'idempotency_key_in_use',
      reason: 'status',
    });
  });

  it.each([408, 500, 501, 502, 504, 599, 304])('%d: OutcomeUnknown', (status) => {
    expect(classify(status, '')).toMatchObject({ type: ErrorType.OutcomeUnknown, status, reason: 'status' });
  });
});

describe('classifyTransportError', () => {
  const e = (code: string) => Object.assign(new Error(code), { code });
  it.each([
    [e('ECONNREFUSED'), false, false, ErrorType.NotSent, 'connect_refused'],
    [new AggregateError([e('ECONNREFUSED'), e('ECONNREFUSED')]), false, false, ErrorType.NotSent, 'connect_refused'],
    [e('ENOTFOUND'), false, false, ErrorType.NotSent, 'dns'],
    [e('EAI_AGAIN'), false, false, ErrorType.NotSent, 'dns'],
    [e('UND_ERR_CONNECT_TIMEOUT'), false, false, ErrorType.NotSent, 'connect_timeout'],
    [new DOMException('timeout', 'TimeoutError'), false, true, ErrorType.NotSent, 'connect_timeout'],
    [e('ECONNRESET'), false, false, ErrorType.NotSent, 'not_sent'],
    [e('ECONNRESET'), true, false, ErrorType.OutcomeUnknown, 'reset_after_send'],
    [e('UND_ERR_SOCKET'), true, false, ErrorType.OutcomeUnknown, 'reset_after_send'],
    [e('UND_ERR_HEADERS_TIMEOUT'), true, false, ErrorType.OutcomeUnknown, 'timeout_after_send'],
    [e('UND_ERR_BODY_TIMEOUT'), true, false, ErrorType.OutcomeUnknown, 'timeout_after_send'],
    [new DOMException('timeout', 'TimeoutError'), true, true, ErrorType.OutcomeUnknown, 'timeout_after_send'],
  ])('%p sent=%p deadline=%p: %s %s', (cause, sent, deadlineExpired, type, reason) => {
    const failure = classifyTransportError(cause, { operation: 'capture', sent, deadlineExpired });
    expect(failure.details).toEqual({ type, operation: 'capture', reason });
    expect(failure.cause).toBe(cause);
  });
});

describe('ProviderError', () => {
  it('carries details, type, cause and a message; subclasses fix the type', () => {
    const cause = new Error('socket hang up');
    const e = new OutcomeUnknownError({ operation: 'create', status: 502, reason: 'status' }, { cause });
    expect(e).toBeInstanceOf(ProviderError);
    expect(e).toBeInstanceOf(Error);
    expect(e.type).toBe(ErrorType.OutcomeUnknown);
    expect(e.name).toBe('OutcomeUnknownError');
    expect(e.cause).toBe(cause);
    expect(e.message).toBe('OutcomeUnknown on create: status, HTTP 502');
    expect(new ProviderUnavailableError({ operation: 'x', reason: 'status', retryAfterMs: 5 }).type).toBe(
      ErrorType.ProviderUnavailable,
    );
    expect(new ProviderRejectedError({ operation: 'x', reason: 'status' }).type).toBe(ErrorType.ProviderRejected);
  });

  it('guards', () => {
    const e = new NotSentError({ operation: 'create', reason: 'connect_refused' });
    expect(isProviderError(e)).toBe(true);
    expect(isProviderError(new Error('x'))).toBe(false);
    expect(isProviderError({ details: {} })).toBe(false);
    expect(isProviderErrorOfType(e, ErrorType.NotSent)).toBe(true);
    expect(isProviderErrorOfType(e, ErrorType.OutcomeUnknown)).toBe(false);
  });
});

describe('log helpers', () => {
  it('keyHash is the first 16 hex digits of HMAC-SHA-256 under LOG_HASH_SECRET, never the plain SHA-256', () => {
    configureKeyHash('log-hash-secret-for-tests');
    // HMAC-SHA-256("log-hash-secret-for-tests", "abc") = 001b50cfce47c5833f0ef3147f88181999482405d45d1866d07704281bcd046d
    expect(keyHash('abc')).toBe('001b50cfce47c583');
    // sha256("abc") starts ba7816bf8f01cfea: a guessable key would be found from it.
    expect(keyHash('abc')).not.toBe('ba7816bf8f01cfea');
  });

  it('stripQuery drops the query', () => {
    expect(stripQuery('/v1/payments?idempotency_key=secret')).toBe('/v1/payments');
    expect(stripQuery('/v1/payments/pay_1')).toBe('/v1/payments/pay_1');
  });

  it('headerValue is case-insensitive and takes the first of a repeated header', () => {
    expect(headerValue({ 'Retry-After': '1' }, 'retry-after')).toBe('1');
    expect(headerValue({ 'set-cookie': ['a', 'b'] }, 'Set-Cookie')).toBe('a');
    expect(headerValue({}, 'x')).toBeUndefined();
  });
});
