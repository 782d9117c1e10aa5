import type { FastifyInstance } from 'fastify';
import { createTokenVerifier } from '../../src/api/auth';
import { verifySimulatorSignature as verifySignature } from '../../src/providers/rest/webhook';
import { IdempotencyKeyReused, PaymentNotFound } from '../../src/client';
import { signWebhook } from '../../src/simulator/signature';
import { STUB_OPERATOR, STUB_TOKEN, startStubApi, stubClient } from './stub';

const view = {
  key: 'k1',
  merchantId: 'm_stub',
  orderId: 'o1',
  status: 'pending',
  amount: { value: 100, currency: 'EUR' },
  amountAuthorized: 0,
  amountCaptured: 0,
  amountRefunded: 0,
  provider: 'simulator',
  attempts: 0,
  createdAt: '2026-01-01T00:00:00.000Z',
  updatedAt: '2026-01-01T00:00:00.000Z',
};
const charge = { orderId: 'o1', amount: { value: 100, currency: 'EUR' }, paymentMethod: 'pm_card_visa' };

let api: { app: FastifyInstance; url: string };
const calls: unknown[][] = [];

beforeAll(async () => {
  api = await startStubApi(
    stubClient({
      charge: async (...args: never[]) => {
        calls.push(args);
        const key = (args as unknown[])[1];
        if (key === 'reused') throw new IdempotencyKeyReused();
        if (key === 'boom') throw new Error('database password is hunter2');
        return { view: { ...view, key }, replayed: key === 'again' };
      },
      get: async () => {
        throw new PaymentNotFound();
      },
      resolve: async (...args: never[]) => {
        calls.push(args);
        return { ...view, key: (args as unknown[])[1], status: 'failed' };
      },
      resolveReviewItem: async (...args: never[]) => {
        calls.push(args);
        throw new PaymentNotFound();
      },
    }),
  );
});
afterAll(() => api.app.close());

const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
  fetch(`${api.url}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${STUB_TOKEN}`, 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });

describe('the HTTP surface', () => {
  it('answers 202 with Location while pending, and marks a repeat', async () => {
    const first = await post('/v1/payments', charge, { 'idempotency-key': 'a/b c' });
    const again = await post('/v1/payments', charge, { 'idempotency-key': 'again' });

    expect(first.status).toBe(202);
    expect(first.headers.get('location')).toBe('/v1/payments/a%2Fb%20c');
    expect(first.headers.get('request-id')).toMatch(/^[0-9a-f-]{36}$/);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    // The merchant comes from the token, the body reaches the client parsed with its defaults.
    expect(calls[0]).toEqual(['m_stub', 'a/b c', { ...charge, provider: 'simulator', capture: 'automatic' }]);
  });

  it('hands an operator’s resolve to the client with the named merchant and `operator:<id>` for the audit', async () => {
    calls.length = 0;
    const answer = await fetch(`${api.url}/v1/payments/k%2F1/resolve?merchantId=m_other`, {
      method: 'POST',
      headers: { authorization: `Bearer ${STUB_OPERATOR.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ outcome: 'failed', note: 'checked at the provider' }),
    });

    expect(answer.status).toBe(200);
    expect(calls).toEqual([
      [
        'm_other',
        'k/1',
        { outcome: 'failed', note: 'checked at the provider' },
        `operator:${STUB_OPERATOR.operatorId}`,
      ],
    ]);
  });

  it('refuses a merchant token on resolve with 403 without calling the client', async () => {
    calls.length = 0;
    const answer = await post('/v1/payments/k1/resolve?merchantId=m_stub', { outcome: 'failed', note: 'mine' });

    expect(answer.status).toBe(403);
    expect(await answer.json()).toEqual({ error: { type: 'forbidden', message: expect.any(String) } });
    expect(calls).toEqual([]);
  });

  it('maps typed client errors to their status and type', async () => {
    const reused = await post('/v1/payments', charge, { 'idempotency-key': 'reused' });
    const missing = await fetch(`${api.url}/v1/payments/nope`, { headers: { authorization: `Bearer ${STUB_TOKEN}` } });

    expect(reused.status).toBe(422);
    expect(((await reused.json()) as { error: { type: string } }).error.type).toBe('idempotency_key_reused');
    expect(missing.status).toBe(404);
    expect(await missing.json()).toEqual({ error: { type: 'not_found', message: 'No such payment' } });
  });

  it('never leaks an internal error message or stack', async () => {
    const answer = await post('/v1/payments', charge, { 'idempotency-key': 'boom' });
    const text = await answer.text();

    expect(answer.status).toBe(500);
    expect(JSON.parse(text)).toEqual({ error: { type: 'internal_error', message: 'Internal error' } });
    expect(text).not.toMatch(/hunter2|at .*\.ts/);
  });

  it('refuses bodies over 16 KiB (413), malformed JSON (400) and other media types (415)', async () => {
    const big = await post('/v1/payments', { ...charge, description: 'x'.repeat(17_000) }, { 'idempotency-key': 'k' });
    const malformed = await post('/v1/payments', '{"orderId":', { 'idempotency-key': 'k' });
    const xml = await post('/v1/payments', '<charge/>', { 'idempotency-key': 'k', 'content-type': 'application/xml' });

    expect(big.status).toBe(413);
    expect(malformed.status).toBe(400);
    expect(((await malformed.json()) as { error: { type: string } }).error.type).toBe('validation_error');
    expect(xml.status).toBe(415);
  });

  it('serves /healthz without a token and answers unknown routes with a JSON 404', async () => {
    const health = await fetch(`${api.url}/healthz`);
    const unknown = await fetch(`${api.url}/v2/nothing`, { headers: { authorization: `Bearer ${STUB_TOKEN}` } });

    expect(health.status).toBe(200);
    expect(await health.json()).toEqual({ status: 'ok' });
    expect(unknown.status).toBe(404);
    expect(((await unknown.json()) as { error: { type: string } }).error.type).toBe('not_found');
  });
});

describe('createTokenVerifier', () => {
  const verify = createTokenVerifier(
    [
      { merchantId: 'm_a', token: 'tok_aaaaaaaaaaaaaaaa' },
      { merchantId: 'm_b', token: 'tok_bbbbbbbbbbbbbbbb' },
    ],
    [{ operatorId: 'ops_1', token: 'tok_oooooooooooooooo' }],
  );

  it('maps each token to its merchant or operator, case-insensitively on the scheme only', () => {
    expect(verify('Bearer tok_aaaaaaaaaaaaaaaa')).toEqual({ role: 'merchant', merchantId: 'm_a' });
    expect(verify('bearer tok_bbbbbbbbbbbbbbbb')).toEqual({ role: 'merchant', merchantId: 'm_b' });
    expect(verify('Bearer tok_oooooooooooooooo')).toEqual({ role: 'operator', operatorId: 'ops_1' });
    expect(verify('Bearer TOK_AAAAAAAAAAAAAAAA')).toBeUndefined();
  });

  it('refuses prefixes, extensions, other schemes and nothing', () => {
    expect(verify('Bearer tok_aaaaaaaaaaaaaaa')).toBeUndefined();
    expect(verify('Bearer tok_ooooooooooooooo')).toBeUndefined();
    expect(verify('Bearer tok_aaaaaaaaaaaaaaaaa')).toBeUndefined();
    expect(verify('Basic tok_aaaaaaaaaaaaaaaa')).toBeUndefined();
    expect(verify('Bearer ')).toBeUndefined();
    expect(verify(undefined)).toBeUndefined();
  });
});

describe('verifySignature', () => {
  const secret = 'whsec_unit';
  const body = '{"id":"evt_1"}';
  const now = 1_800_000_000;

  it('accepts what the simulator signs, within the tolerance either way', () => {
    expect(verifySignature(secret, signWebhook(secret, body, now), body, 300, now)).toEqual({ ok: true, t: now });
    expect(verifySignature(secret, signWebhook(secret, body, now - 300), body, 300, now).ok).toBe(true);
    expect(verifySignature(secret, signWebhook(secret, body, now + 300), body, 300, now).ok).toBe(true);
  });

  it('accepts any of several v1 entries (secret rotation)', () => {
    const header = `${signWebhook('whsec_old', body, now)},${signWebhook(secret, body, now).split(',')[1]}`;

    expect(verifySignature(secret, header, body, 300, now).ok).toBe(true);
  });

  it.each([
    ['missing', undefined],
    ['malformed', 'v1=abc'],
    ['malformed', `t=${now}`],
    ['stale', signWebhook(secret, body, now - 301)],
    ['mismatch', signWebhook('whsec_other', body, now)],
  ])('refuses %s', (reason, header) => {
    expect(verifySignature(secret, header, body, 300, now)).toEqual({ ok: false, reason });
  });

  it('refuses a body changed after signing', () => {
    expect(verifySignature(secret, signWebhook(secret, body, now), body.replace('1', '2'), 300, now)).toEqual({
      ok: false,
      reason: 'mismatch',
    });
  });
});
