import { signWebhook, verifyWebhookSignature } from '../../src/simulator/signature';

const secret = 'whsec_unit';
const body = JSON.stringify({ id: 'evt_1', type: 'payment.succeeded', created: 1_700_000_000, data: {} });
const t = 1_700_000_000;
const opts = { toleranceS: 300, nowS: t + 10 };

describe('webhook signatures', () => {
  it('verifies what it signed, over string and byte bodies', () => {
    const header = signWebhook(secret, body, t);
    expect(header).toMatch(/^t=1700000000,v1=[0-9a-f]{64}$/);
    expect(verifyWebhookSignature(secret, header, body, opts)).toEqual({ ok: true, t });
    expect(verifyWebhookSignature(secret, header, Buffer.from(body), opts)).toEqual({ ok: true, t });
    expect(signWebhook(secret, Buffer.from(body), t)).toBe(header);
  });

  it('fails when the body changes', () => {
    const header = signWebhook(secret, body, t);
    expect(verifyWebhookSignature(secret, header, body.replace('evt_1', 'evt_2'), opts)).toEqual({
      ok: false,
      reason: 'mismatch',
    });
    expect(verifyWebhookSignature(secret, header, `${body} `, opts).ok).toBe(false);
  });

  it('fails when the timestamp changes', () => {
    const header = signWebhook(secret, body, t).replace(`t=${t}`, `t=${t + 1}`);
    expect(verifyWebhookSignature(secret, header, body, opts)).toEqual({ ok: false, reason: 'mismatch' });
  });

  it('fails with another secret', () => {
    const header = signWebhook('whsec_other', body, t);
    expect(verifyWebhookSignature(secret, header, body, opts)).toEqual({ ok: false, reason: 'mismatch' });
  });

  it('fails when older (or newer) than the tolerance', () => {
    const header = signWebhook(secret, body, t);
    expect(verifyWebhookSignature(secret, header, body, { toleranceS: 300, nowS: t + 300 }).ok).toBe(true);
    expect(verifyWebhookSignature(secret, header, body, { toleranceS: 300, nowS: t + 301 })).toEqual({
      ok: false,
      reason: 'stale',
    });
    expect(verifyWebhookSignature(secret, header, body, { toleranceS: 300, nowS: t - 301 })).toEqual({
      ok: false,
      reason: 'stale',
    });
  });

  it('refuses missing and malformed headers', () => {
    expect(verifyWebhookSignature(secret, undefined, body, opts)).toEqual({ ok: false, reason: 'missing' });
    expect(verifyWebhookSignature(secret, '', body, opts)).toEqual({ ok: false, reason: 'missing' });
    expect(verifyWebhookSignature(secret, 'garbage', body, opts)).toEqual({ ok: false, reason: 'malformed' });
    expect(verifyWebhookSignature(secret, `t=${t}`, body, opts)).toEqual({ ok: false, reason: 'malformed' });
    expect(verifyWebhookSignature(secret, `t=${t},v1=abc`, body, opts)).toEqual({ ok: false, reason: 'malformed' });
  });

  it('accepts any of several v1 signatures (secret rotation)', () => {
    const old = signWebhook('whsec_old', body, t).split(',')[1];
    const header = `${signWebhook(secret, body, t)},${old}`;
    expect(verifyWebhookSignature('whsec_old', header, body, opts).ok).toBe(true);
    expect(verifyWebhookSignature(secret, header, body, opts).ok).toBe(true);
  });
});
