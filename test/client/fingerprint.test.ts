import { captureFingerprint, chargeFingerprint, refundFingerprint } from '../../src/client';
import { ChargeRequest } from '../../src/domain/payment';

const parse = (v: unknown) => ChargeRequest.parse(v);
const base = { orderId: 'order_1', amount: { value: 1_000, currency: 'EUR' }, paymentMethod: 'pm_card_visa' };

describe('fingerprints', () => {
  it('ignore member order and explicit defaults', () => {
    const a = chargeFingerprint(parse(base));
    const b = chargeFingerprint(
      parse({
        paymentMethod: 'pm_card_visa',
        capture: 'automatic',
        provider: 'simulator',
        amount: { currency: 'EUR', value: 1_000 },
        orderId: 'order_1',
      }),
    );

    expect(a).toMatch(/^[0-9a-f]{64}$/);
    expect(b).toBe(a);
  });

  it('change with every significant field', () => {
    const fingerprints = [
      base,
      { ...base, orderId: 'order_2' },
      { ...base, amount: { value: 1_001, currency: 'EUR' } },
      { ...base, amount: { value: 1_000, currency: 'USD' } },
      { ...base, paymentMethod: 'pm_other' },
      { ...base, capture: 'manual' },
      { ...base, description: 'x' },
    ].map((r) => chargeFingerprint(parse(r)));

    expect(new Set(fingerprints).size).toBe(fingerprints.length);
  });

  it('scope captures and refunds to their payment and amount', () => {
    expect(captureFingerprint('p1', {})).not.toBe(captureFingerprint('p1', { amount: 5 }));
    expect(captureFingerprint('p1', { amount: 5 })).not.toBe(captureFingerprint('p2', { amount: 5 }));
    expect(refundFingerprint('p1', { amount: 5 })).not.toBe(captureFingerprint('p1', { amount: 5 }));
    expect(refundFingerprint('p1', { amount: 5 })).toBe(refundFingerprint('p1', { amount: 5 }));
  });
});
