import {
  CaptureRequest,
  ChargeRequest,
  Currency,
  IdempotencyKey,
  Money,
  PaymentStatus,
  PaymentView,
  RefundRequest,
  ResolveRequest,
  canonicalJson,
  isSettledStatus,
  isTerminalStatus,
  significantFields,
  type ChargeRequestInput,
} from '../../src/domain';

const valid: ChargeRequestInput = {
  orderId: 'order-1001',
  amount: { value: 1999, currency: 'EUR' },
  paymentMethod: 'pm_card_visa',
};

/** The failing field paths, joined with dots. */
const pathsOf = (result: { success: boolean; error?: { issues: { path: PropertyKey[] }[] } }) =>
  (result.error?.issues ?? []).map((i) => i.path.map(String).join('.'));

describe('Money and Currency', () => {
  it('accepts integer minor units in an active ISO 4217 currency', () => {
    expect(Money.parse({ value: 1, currency: 'JPY' })).toEqual({ value: 1, currency: 'JPY' });
    expect(Money.parse({ value: Number.MAX_SAFE_INTEGER, currency: 'USD' }).value).toBe(Number.MAX_SAFE_INTEGER);
  });

  it.each([
    [{ value: 0, currency: 'EUR' }, 'value'],
    [{ value: -5, currency: 'EUR' }, 'value'],
    [{ value: 19.99, currency: 'EUR' }, 'value'],
    [{ value: Number.MAX_SAFE_INTEGER + 1, currency: 'EUR' }, 'value'],
    [{ value: 100, currency: 'eur' }, 'currency'],
    [{ value: 100, currency: 'XXX' }, 'currency'],
    [{ value: 100, currency: 'HRK' }, 'currency'],
    [{ value: 100, currency: 'XAU' }, 'currency'],
    [{ value: 100, currency: 'EUR', extra: 1 }, ''],
  ])('rejects %j at %s', (input, path) => {
    expect(pathsOf(Money.safeParse(input))).toContain(path);
  });

  it('knows the current codes', () => {
    for (const code of ['EUR', 'USD', 'GBP', 'JPY', 'CHF', 'ZWG', 'SLE', 'XCG', 'VED']) {
      expect(Currency.safeParse(code).success).toBe(true);
    }
  });
});

describe('ChargeRequest', () => {
  it('applies defaults: provider simulator, capture automatic', () => {
    expect(ChargeRequest.parse(valid)).toEqual({ ...valid, provider: 'simulator', capture: 'automatic' });
  });

  it('trims the order id', () => {
    expect(ChargeRequest.parse({ ...valid, orderId: '  order-7 ' }).orderId).toBe('order-7');
  });

  it.each<[string, Record<string, unknown>, string]>([
    ['an empty order id', { orderId: '   ' }, 'orderId'],
    ['an order id over 128 chars', { orderId: 'o'.repeat(129) }, 'orderId'],
    ['a control character in the order id', { orderId: 'a\nb' }, 'orderId'],
    ['a card number as order id', { orderId: 'order 4242 4242 4242 4242' }, 'orderId'],
    ['a card number as payment method', { paymentMethod: '4242424242424242' }, 'paymentMethod'],
    ['a payment method with spaces', { paymentMethod: 'pm card' }, 'paymentMethod'],
    ['a float amount', { amount: { value: 10.5, currency: 'EUR' } }, 'amount.value'],
    ['a lower-case currency', { amount: { value: 10, currency: 'eur' } }, 'amount.currency'],
    ['an unknown capture mode', { capture: 'later' }, 'capture'],
    ['a provider name with upper case', { provider: 'Stripe' }, 'provider'],
    ['a description over 500 chars', { description: 'd'.repeat(501) }, 'description'],
    ['an unknown field', { customer: 'c_1' }, ''],
  ])('rejects %s', (_name, patch, path) => {
    const result = ChargeRequest.safeParse({ ...valid, ...patch });
    expect(result.success).toBe(false);
    expect(pathsOf(result)).toContain(path);
  });

  it.each([
    'ORD-20250101-00042',
    '5678901234567',
    'INV 2025 0001 0002',
    'A-1234-5678-9012',
    // A UUID whose middle groups happen to be all digits (seen as a CI flake with random order ids).
    'order_abcd1234-7890-4123-9456-abcdef012345',
  ])('accepts the order id %s (digit runs that are not written like a card number)', (orderId) => {
    expect(ChargeRequest.safeParse({ ...valid, orderId }).success).toBe(true);
  });

  it.each([
    '4242-4242-4242-4242',
    'card 3782 822463 10005',
    'x 6011 0009 9013 9424 123',
    'order_4242-4242-4242-4242',
    'paid with 4242 4242 4242 4242.',
  ])('rejects the order id %s (written like a card number)', (orderId) => {
    expect(pathsOf(ChargeRequest.safeParse({ ...valid, orderId }))).toEqual(['orderId']);
  });
});

describe('other request bodies', () => {
  it('IdempotencyKey: 1–255 printable ASCII, no surrounding space', () => {
    expect(IdempotencyKey.safeParse('k'.repeat(255)).success).toBe(true);
    expect(IdempotencyKey.safeParse('order 1 / try 2').success).toBe(true);
    for (const bad of ['', 'k'.repeat(256), ' lead', 'trail ', 'tab\there', 'ümlaut']) {
      expect(IdempotencyKey.safeParse(bad).success).toBe(false);
    }
  });

  it('CaptureRequest: amount optional, positive integer', () => {
    expect(CaptureRequest.parse({})).toEqual({});
    expect(pathsOf(CaptureRequest.safeParse({ amount: 0 }))).toEqual(['amount']);
    expect(pathsOf(CaptureRequest.safeParse({ amount: 1, currency: 'EUR' }))).toEqual(['']);
  });

  it('RefundRequest: amount required', () => {
    expect(pathsOf(RefundRequest.safeParse({}))).toEqual(['amount']);
    expect(RefundRequest.parse({ amount: 5 })).toEqual({ amount: 5 });
  });

  it('ResolveRequest: outcome and a non-empty note', () => {
    expect(ResolveRequest.parse({ outcome: 'failed', note: ' checked with the bank ' }).note).toBe(
      'checked with the bank',
    );
    expect(pathsOf(ResolveRequest.safeParse({ outcome: 'maybe', note: '' })).sort()).toEqual(['note', 'outcome']);
  });
});

describe('PaymentStatus and PaymentView', () => {
  it('lists the nine statuses and which are terminal or settled', () => {
    expect(PaymentStatus.options).toHaveLength(9);
    expect(PaymentStatus.options.filter(isTerminalStatus).sort()).toEqual([
      'declined',
      'failed',
      'succeeded',
      'voided',
    ]);
    expect(PaymentStatus.options.filter((s) => !isSettledStatus(s)).sort()).toEqual([
      'needs_review',
      'pending',
      'requires_action',
      'unknown',
    ]);
  });

  it('parses the shape docs/http-api.md documents', () => {
    const view = {
      key: 'k1',
      merchantId: 'm1',
      orderId: 'o1',
      status: 'unknown',
      amount: { value: 100, currency: 'EUR' },
      amountAuthorized: 0,
      amountCaptured: 0,
      amountRefunded: 0,
      provider: 'simulator',
      attempts: 1,
      unknownSince: '2025-01-01T00:00:00.000Z',
      createdAt: '2025-01-01T00:00:00.000Z',
      updatedAt: '2025-01-01T00:00:01.000Z',
    };
    expect(PaymentView.parse(view)).toEqual(view);
    expect(pathsOf(PaymentView.safeParse({ ...view, createdAt: 'yesterday' }))).toEqual(['createdAt']);
  });
});

describe('fingerprint inputs', () => {
  it('covers the parsed request with defaults applied, whatever the field order', () => {
    const a = ChargeRequest.parse(valid);
    const b = ChargeRequest.parse({
      capture: 'automatic',
      paymentMethod: 'pm_card_visa',
      provider: 'simulator',
      amount: { currency: 'EUR', value: 1999 },
      orderId: 'order-1001',
    });
    expect(canonicalJson(significantFields(a))).toBe(canonicalJson(significantFields(b)));
    expect(canonicalJson(significantFields(a))).toBe(
      '{"amount":{"currency":"EUR","value":1999},"capture":"automatic","operation":"charge","orderId":"order-1001","paymentMethod":"pm_card_visa","provider":"simulator"}',
    );
  });

  it('changes with any significant field', () => {
    const base = canonicalJson(significantFields(ChargeRequest.parse(valid)));
    for (const patch of [
      { amount: { value: 2000, currency: 'EUR' } },
      { capture: 'manual' },
      { description: 'x' },
      { orderId: 'order-1002' },
    ]) {
      expect(canonicalJson(significantFields(ChargeRequest.parse({ ...valid, ...patch })))).not.toBe(base);
    }
  });

  it('canonicalJson refuses what JSON cannot carry exactly', () => {
    expect(() => canonicalJson({ a: Number.NaN })).toThrow(TypeError);
    expect(() => canonicalJson({ a: 1n })).toThrow(TypeError);
    expect(canonicalJson({ b: [1, undefined], a: undefined })).toBe('{"b":[1,null]}');
  });
});
