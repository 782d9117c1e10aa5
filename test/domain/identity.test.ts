import {
  acceptUpdate,
  ChargeWorkflowInput,
  PaymentTimings,
  ProviderEvent,
  captureWorkflowId,
  chargeWorkflowId,
  defaultPaymentTimings,
  parseChargeWorkflowId,
  paymentQuery,
  paymentSearchAttributes,
  reconcileResolvedSignal,
  reconcileWindowMs,
  reconcileWorkflowId,
  refundWorkflowId,
  resolveUpdate,
  scopeOf,
  submitUpdate,
  webhookSignal,
} from '../../src/domain';

describe('ids', () => {
  it('follows docs/architecture.md: <kind>:<merchantId>:<key>', () => {
    expect(chargeWorkflowId('m_1', 'key:with:colons')).toBe('charge:m_1:key:with:colons');
    expect(captureWorkflowId('m_1', 'c1')).toBe('capture:m_1:c1');
    expect(refundWorkflowId('m_1', 'r1')).toBe('refund:m_1:r1');
    expect(reconcileWorkflowId('m_1', 'create', 'k')).toBe('reconcile:m_1:create:k');
    expect(scopeOf('m_1', 'capture', 'k')).toBe('m_1:capture:k');
  });

  it('parses a charge workflow id back, keys with colons included', () => {
    expect(parseChargeWorkflowId('charge:m_1:a:b')).toEqual({ merchantId: 'm_1', key: 'a:b' });
    expect(parseChargeWorkflowId('capture:m_1:a')).toBeNull();
  });
});

describe('definitions', () => {
  it('keeps the wire names stable', () => {
    expect(submitUpdate.name).toBe('submit');
    expect(acceptUpdate.name).toBe('accept');
    expect(resolveUpdate.name).toBe('resolve');
    expect(webhookSignal.name).toBe('providerEvent');
    expect(paymentQuery.name).toBe('payment');
    expect(reconcileResolvedSignal.name).toBe('reconcileResolved');
  });

  it('ProviderEvent validates the converted webhook', () => {
    const event = {
      eventId: 'evt_1',
      type: 'payment.succeeded',
      created: 1_700_000_000,
      payment: {
        id: 'pay_1',
        status: 'succeeded',
        amount: 100,
        amountCaptured: 100,
        amountRefunded: 0,
        currency: 'EUR',
        reference: 'o1',
        created: 1_700_000_000,
      },
    };
    expect(ProviderEvent.parse(event)).toEqual(event);
    const bad = ProviderEvent.safeParse({ ...event, type: 'payment.exploded' });
    expect(bad.error?.issues.map((i) => i.path.join('.'))).toEqual(['type']);
  });

  it('registers four keyword search attributes and the datetime the sweep finds continued unknown runs by', () => {
    expect(paymentSearchAttributes.map((k) => [k.name, k.type])).toEqual([
      ['PaymentStatus', 'KEYWORD'],
      ['MerchantId', 'KEYWORD'],
      ['OrderId', 'KEYWORD'],
      ['Provider', 'KEYWORD'],
      ['UnknownSince', 'DATETIME'],
    ]);
  });
});

describe('workflow inputs', () => {
  it('defaults are production values and valid', () => {
    expect(PaymentTimings.parse(defaultPaymentTimings)).toEqual(defaultPaymentTimings);
    expect(defaultPaymentTimings.reconcileScheduleMs).toEqual([
      15_000, 30_000, 60_000, 120_000, 240_000, 480_000, 3_600_000, 21_600_000,
    ]);
    expect(reconcileWindowMs(defaultPaymentTimings)).toBe(26_145_000);
  });

  it('rejects a sweep threshold inside the reconcile schedule', () => {
    const r = PaymentTimings.safeParse({ ...defaultPaymentTimings, unknownSweepThresholdMs: 60_000 });
    expect(r.error?.issues.map((i) => i.path.join('.'))).toEqual(['unknownSweepThresholdMs']);
  });

  it('ChargeWorkflowInput applies request defaults and checks the fingerprint', () => {
    const input = {
      merchantId: 'm_1',
      key: 'k1',
      fingerprint: 'a'.repeat(64),
      request: { orderId: 'o1', amount: { value: 5, currency: 'EUR' }, paymentMethod: 'pm_x' },
      timings: defaultPaymentTimings,
      retry: { create: { budgetMs: 10_000 } },
    };
    expect(ChargeWorkflowInput.parse(input).request.capture).toBe('automatic');
    const bad = ChargeWorkflowInput.safeParse({ ...input, fingerprint: 'nope', merchantId: 'a:b' });
    expect(bad.error?.issues.map((i) => i.path.join('.')).sort()).toEqual(['fingerprint', 'merchantId']);
  });
});
