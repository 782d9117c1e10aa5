import { verifySimulatorSignature } from '../../src/providers/rest/webhook';
import { signWebhook } from '../../src/simulator/signature';

const secret = 'whsec_unit';
const body = JSON.stringify({ id: 'evt_1', type: 'payment.succeeded', created: 1_700_000_000, data: {} });
const t = 1_700_000_000;
const opts = { toleranceS: 300, nowS: t + 10 };

describe('webhook signatures', () => {
  it('verifies what it signed, over string and byte bodies', () => {
    const header = signWebhook(secret, body, t);
    expect(header).toMatch(/^t=1700000000,v1=[0-9a-f]{64}$/);
    expect(verifySimulatorSignature(secret, header, body, opts.toleranceS, opts.nowS)).toEqual({ ok: true, t });
    expect(verifySimulatorSignature(secret, header, Buffer.from(body), opts.toleranceS, opts.nowS)).toEqual({
      ok: true,
      t,
    });
    expect(signWebhook(secret, Buffer.from(body), t)).toBe(header);
  });

  it('fails when the body changes', () => {
    const header = signWebhook(secret, body, t);
    expect(
      verifySimulatorSignature(secret, header, body.replace('evt_1', 'evt_2'), opts.toleranceS, opts.nowS),
    ).toEqual({
      ok: false,
      reason: 'mismatch',
    });
    expect(verifySimulatorSignature(secret, header, `${body} `, opts.toleranceS, opts.nowS).ok).toBe(false);
  });

  it('fails when the timestamp changes', () => {
    const header = signWebhook(secret, body, t).replace(`t=${t}`, `t=${t + 1}`);
    expect(verifySimulatorSignature(secret, header, body, opts.toleranceS, opts.nowS)).toEqual({
      ok: false,
      reason: 'mismatch',
    });
  });

  it('fails with another secret', () => {
    const header = signWebhook('whsec_other', body, t);
    expect(verifySimulatorSignature(secret, header, body, opts.toleranceS, opts.nowS)).toEqual({
      ok: false,
      reason: 'mismatch',
    });
  });

  it('fails when older (or newer) than the tolerance', () => {
    const header = signWebhook(secret, body, t);
    expect(verifySimulatorSignature(secret, header, body, 300, t + 300).ok).toBe(true);
    expect(verifySimulatorSignature(secret, header, body, 300, t + 301)).toEqual({
      ok: false,
      reason: 'stale',
    });
    expect(verifySimulatorSignature(secret, header, body, 300, t - 301)).toEqual({
      ok: false,
      reason: 'stale',
    });
  });

  it('refuses missing and malformed headers', () => {
    expect(verifySimulatorSignature(secret, undefined, body, opts.toleranceS, opts.nowS)).toEqual({
      ok: false,
      reason: 'missing',
    });
    expect(verifySimulatorSignature(secret, '', body, opts.toleranceS, opts.nowS)).toEqual({
      ok: false,
      reason: 'missing',
    });
    expect(verifySimulatorSignature(secret, 'garbage', body, opts.toleranceS, opts.nowS)).toEqual({
      ok: false,
      reason: 'malformed',
    });
    expect(verifySimulatorSignature(secret, `t=${t}`, body, opts.toleranceS, opts.nowS)).toEqual({
      ok: false,
      reason: 'malformed',
    });
    expect(verifySimulatorSignature(secret, `t=${t},v1=abc`, body, opts.toleranceS, opts.nowS)).toEqual({
      ok: false,
      reason: 'malformed',
    });
  });

  it('accepts any of several v1 signatures (secret rotation)', () => {
    const old = signWebhook('whsec_old', body, t).split(',')[1];
    const header = `${signWebhook(secret, body, t)},${old}`;
    expect(verifySimulatorSignature('whsec_old', header, body, opts.toleranceS, opts.nowS).ok).toBe(true);
    expect(verifySimulatorSignature(secret, header, body, opts.toleranceS, opts.nowS).ok).toBe(true);
  });
});
