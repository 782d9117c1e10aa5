/**
 * The pure parts of merchant webhooks: `Payments-Signature` as a receiver checks it, the retry schedule (at least
 * three days by default, each wait from the upper half of its step), the endpoint URL rules and what a private host is.
 */
import { EndpointUrl, isPrivateHost } from '../../src/domain/webhook-endpoints';
import { loadConfig } from '../../src/config';
import {
  defaultMerchantWebhookSettings,
  newEndpointSecret,
  retryDelayMs,
  signEvent,
  verifyEventSignature,
} from '../../src/merchant-webhooks';

describe('Payments-Signature', () => {
  const secret = newEndpointSecret();
  const body = JSON.stringify({ id: 'evt_1', type: 'payment.succeeded', created: 1, data: { payment: {} } });
  const now = 1_750_000_000;

  it('is t=<unix s>,v1=<hex HMAC-SHA256 of "<t>.<body>">, and verifies with the secret', () => {
    const header = signEvent(secret, body, now);
    expect(header).toMatch(/^t=1750000000,v1=[0-9a-f]{64}$/);
    expect(verifyEventSignature(header, body, secret, 300, now + 10)).toBe(true);
  });

  it('refuses another secret, another body, a stale or future t, and garbage', () => {
    const header = signEvent(secret, body, now);
    expect(verifyEventSignature(header, body, newEndpointSecret(), 300, now)).toBe(false);
    expect(verifyEventSignature(header, `${body} `, secret, 300, now)).toBe(false);
    expect(verifyEventSignature(header, body, secret, 300, now + 301)).toBe(false);
    expect(verifyEventSignature(header, body, secret, 300, now - 301)).toBe(false);
    expect(verifyEventSignature(undefined, body, secret, 300, now)).toBe(false);
    expect(verifyEventSignature('t=abc,v1=zz', body, secret, 300, now)).toBe(false);
  });

  it('accepts any of several v1 values (a receiver rotating secrets signs nothing, it checks each)', () => {
    const header = `${signEvent(secret, body, now)},v1=${'0'.repeat(64)}`;
    expect(verifyEventSignature(header, body, secret, 300, now)).toBe(true);
  });

  it('secrets are whsec_ and new each time', () => {
    const a = newEndpointSecret();
    expect(a).toMatch(/^whsec_[A-Za-z0-9_-]{43}$/);
    expect(newEndpointSecret()).not.toBe(a);
  });
});

describe('the retry schedule', () => {
  const backoff = { initialMs: 5_000, maxMs: 3_600_000 };

  it('doubles from the initial wait, each wait drawn from the upper half of its step, capped', () => {
    expect(retryDelayMs(1, backoff, () => 0)).toBe(2_500);
    expect(retryDelayMs(1, backoff, () => 1)).toBe(5_000);
    expect(retryDelayMs(3, backoff, () => 1)).toBe(20_000);
    expect(retryDelayMs(30, backoff, () => 1)).toBe(3_600_000);
    expect(retryDelayMs(30, backoff, () => 0)).toBe(1_800_000);
  });

  it('waits at least what the endpoint asked for (Retry-After), never past the cap', () => {
    expect(retryDelayMs(1, backoff, () => 0, 60_000)).toBe(60_000);
    expect(retryDelayMs(1, backoff, () => 0, 86_400_000)).toBe(3_600_000);
  });

  it('retries for three days by default; production refuses less', () => {
    expect(defaultMerchantWebhookSettings.retryForMs).toBe(3 * 86_400_000);
    expect(loadConfig({}).merchantWebhooks.retryForMs).toBe(3 * 86_400_000);
    expect(() =>
      loadConfig({
        NODE_ENV: 'production',
        PROVIDER_API_KEY: 'sk_live_xxxxxxxx',
        API_TOKENS: 'm1:tok_0123456789abcdef',
        WEBHOOK_SECRET: 'whsec_xxxxxxxx',
        PAYLOAD_KEYS: 'k1:cGF5bWVudC13b3JrZmxvd3MtZGV2LWtleS0zMmJ5dGU=',
        MERCHANT_WEBHOOK_RETRY_FOR_MS: String(86_400_000),
      }),
    ).toThrow(/MERCHANT_WEBHOOK_RETRY_FOR_MS: must be at least 3 days in production/);
  });

  it('private endpoint URLs: allowed in development, refused by default in production', () => {
    expect(loadConfig({}).MERCHANT_WEBHOOK_ALLOW_PRIVATE_URLS).toBe(true);
    expect(loadConfig({ MERCHANT_WEBHOOK_ALLOW_PRIVATE_URLS: 'false' }).MERCHANT_WEBHOOK_ALLOW_PRIVATE_URLS).toBe(
      false,
    );
  });
});

describe('endpoint URLs', () => {
  it.each([
    ['https', 'https://merchant.example/hooks', true],
    ['http on an address', 'http://127.0.0.1:8080/hooks', true],
    ['another scheme', 'ftp://merchant.example/hooks', false],
    ['no scheme', 'merchant.example/hooks', false],
    ['credentials', 'https://user:pw@merchant.example/hooks', false],
    ['over 2048 characters', `https://merchant.example/${'a'.repeat(2_048)}`, false],
  ])('%s', (_what, url, ok) => {
    expect(EndpointUrl.safeParse(url).success).toBe(ok);
  });

  it.each([
    ['http://127.0.0.1/x', true],
    ['http://localhost:3000/x', true],
    ['http://10.1.2.3/x', true],
    ['http://172.16.0.1/x', true],
    ['http://192.168.1.1/x', true],
    ['http://169.254.169.254/latest/meta-data', true],
    ['http://[::1]/x', true],
    ['http://[::ffff:127.0.0.1]/x', true],
    ['http://[fd00::1]/x', true],
    ['http://2130706433/x', true],
    ['https://merchant.example/x', false],
    ['http://172.32.0.1/x', false],
    ['http://8.8.8.8/x', false],
    ['http://[2001:db8::1]/x', false],
  ])('private host %s: %s', (url, isPrivate) => {
    expect(isPrivateHost(url)).toBe(isPrivate);
  });
});
