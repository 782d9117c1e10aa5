/**
 * The adoption rules (pure): all merchants share one provider account, so a provider payment is ours only when its
 * metadata names this merchant and key, or, without any metadata, when it is the one candidate matching every field.
 */
import {
  type AdoptionCandidate,
  adoptCandidate,
  attributeProviderPayment,
  matchesCharge,
  metadataVerdict,
} from '../../src/domain/adoption';
import type { ProviderEvent } from '../../src/domain/definitions';
import type { PaymentView } from '../../src/domain/payment';
import { paymentMetadata } from '../../src/workflows/activity-options';
import { type PaymentState, applyProviderEvent, eventMayBeOurs } from '../../src/workflows/payment-state';

const A = { merchantId: 'm_a', key: 'key_a' };
const B = { merchantId: 'm_b', key: 'key_b' };
const T0 = Date.parse('2030-01-01T00:00:00Z');
const facts = { amount: 1_000, currency: 'EUR', reference: 'order_1', notBeforeMs: T0 };

/** A provider payment of order_1 for 10.00 EUR created 5 s after T0; override any field. */
const payment = (over: Partial<AdoptionCandidate & { id: string }> = {}) => ({
  id: 'pay_1',
  amount: 1_000,
  currency: 'EUR',
  reference: 'order_1',
  created: T0 / 1000 + 5,
  ...over,
});

describe('metadataVerdict', () => {
  it('reads the metadata the charge workflow sends', () => {
    expect(metadataVerdict(paymentMetadata(A.merchantId, A.key), A)).toBe('ours');
  });
  it.each([
    ['another merchant, same key', { merchant_id: B.merchantId, payment_key: A.key }],
    ['same merchant, another key', { merchant_id: A.merchantId, payment_key: B.key }],
    ['another merchant without a key', { merchant_id: B.merchantId }],
    ['another integration’s tags', { order: 'order_1' }],
  ])('metadata naming anyone else is foreign: %s', (_what, metadata) => {
    expect(metadataVerdict(metadata, A)).toBe('foreign');
  });
  it('no metadata at all (absent or empty) is silent', () => {
    expect(metadataVerdict(undefined, A)).toBe('silent');
    expect(metadataVerdict({}, A)).toBe('silent');
  });
});

describe('matchesCharge', () => {
  it('needs every field: amount, currency, reference, created after our first send (minus the clock skew)', () => {
    expect(matchesCharge(payment(), facts)).toBe(true);
    expect(matchesCharge(payment({ amount: 1_001 }), facts)).toBe(false);
    expect(matchesCharge(payment({ currency: 'USD' }), facts)).toBe(false);
    expect(matchesCharge(payment({ reference: 'order_2' }), facts)).toBe(false);
    expect(matchesCharge(payment({ created: T0 / 1000 - 30 }), facts, 60_000)).toBe(true);
    expect(matchesCharge(payment({ created: T0 / 1000 - 61 }), facts, 60_000)).toBe(false);
  });
});

describe('adoptCandidate (a lookup by reference)', () => {
  it('never adopts a payment whose metadata names another merchant, however well its fields match', () => {
    expect(adoptCandidate([payment({ metadata: paymentMetadata(B.merchantId, B.key) })], A, facts)).toEqual({
      kind: 'none',
    });
  });
  it('adopts the payment naming us among another merchant’s of the same order and amount', () => {
    const ours = payment({ id: 'pay_a', metadata: paymentMetadata(A.merchantId, A.key) });
    const theirs = payment({ id: 'pay_b', created: T0 / 1000 + 9, metadata: paymentMetadata(B.merchantId, B.key) });
    expect(adoptCandidate([theirs, ours], A, facts)).toEqual({ kind: 'adopt', payment: ours, by: 'metadata' });
  });
  it('metadata decides over fields: a payment naming us is ours even next to a matching one without metadata', () => {
    const ours = payment({ id: 'pay_a', metadata: paymentMetadata(A.merchantId, A.key) });
    expect(adoptCandidate([payment({ id: 'pay_x' }), ours], A, facts)).toMatchObject({ kind: 'adopt', payment: ours });
  });
  it('without metadata: exactly one candidate matching every field is adopted, two are ambiguous', () => {
    const one = payment({ id: 'pay_1' });
    expect(adoptCandidate([one, payment({ id: 'pay_old', created: T0 / 1000 - 3_600 })], A, facts)).toEqual({
      kind: 'adopt',
      payment: one,
      by: 'fields',
    });
    expect(adoptCandidate([one, payment({ id: 'pay_2' })], A, facts)).toEqual({ kind: 'ambiguous', count: 2 });
    expect(adoptCandidate([payment({ amount: 999 })], A, facts)).toEqual({ kind: 'none' });
  });
  it('two payments naming our own key are ambiguous (a double charge for an operator), never a pick', () => {
    const metadata = paymentMetadata(A.merchantId, A.key);
    expect(adoptCandidate([payment({ id: 'p1', metadata }), payment({ id: 'p2', metadata })], A, facts)).toMatchObject({
      kind: 'ambiguous',
      count: 2,
    });
  });
});

/** One of our payments as routing and the sweep see it. */
const ours = (owner: { merchantId: string; key: string }, over: Partial<PaymentView> = {}) => ({
  id: `charge:${owner.merchantId}:${owner.key}`,
  view: {
    merchantId: owner.merchantId,
    key: owner.key,
    orderId: 'order_1',
    amount: { value: 1_000, currency: 'EUR' },
    createdAt: new Date(T0).toISOString(),
    ...over,
  },
});

describe('attributeProviderPayment (a webhook or a sweep finding by reference)', () => {
  it('with metadata: only the payment it names, never the only payment of the order', () => {
    const a = ours(A);
    expect(attributeProviderPayment(payment({ metadata: { merchant_id: B.merchantId } }), [a])).toEqual({
      kind: 'unmatched',
    });
    expect(attributeProviderPayment(payment({ metadata: paymentMetadata(A.merchantId, A.key) }), [ours(B), a])).toEqual(
      { kind: 'owner', candidate: a, by: 'metadata' },
    );
  });
  it('without metadata: the payment recording it, else the only one waiting whose every field matches', () => {
    const a = ours(A);
    const b = ours(B, { providerPaymentId: 'pay_b' });
    expect(attributeProviderPayment(payment({ id: 'pay_b' }), [a, b])).toMatchObject({ kind: 'owner', candidate: b });
    expect(attributeProviderPayment(payment({ id: 'pay_new' }), [a, b])).toMatchObject({
      kind: 'owner',
      candidate: a,
      by: 'fields',
    });
    // The only payment of the order, but its amount differs, or it records another provider payment: not its owner.
    expect(attributeProviderPayment(payment({ id: 'pay_new', amount: 1_500 }), [a])).toEqual({ kind: 'unmatched' });
    expect(attributeProviderPayment(payment({ id: 'pay_new' }), [b])).toEqual({ kind: 'unmatched' });
    // Created before our payment existed: not ours.
    expect(attributeProviderPayment(payment({ id: 'pay_new', created: T0 / 1000 - 3_600 }), [a])).toEqual({
      kind: 'unmatched',
    });
    expect(attributeProviderPayment(payment({ id: 'pay_new' }), [a, ours(B)])).toEqual({
      kind: 'ambiguous',
      count: 2,
    });
  });
});

/** A's charge state, unknown, no provider payment known yet. */
function stateOfA(over: Partial<PaymentView> = {}): PaymentState {
  const at = new Date(T0).toISOString();
  return {
    view: {
      key: A.key,
      merchantId: A.merchantId,
      orderId: 'order_1',
      status: 'unknown',
      amount: { value: 1_000, currency: 'EUR' },
      amountAuthorized: 0,
      amountCaptured: 0,
      amountRefunded: 0,
      provider: 'simulator',
      attempts: 1,
      unknownSince: at,
      createdAt: at,
      updatedAt: at,
      ...over,
    },
    fingerprint: 'fp',
    seenEvents: [],
    subOperations: [],
    firstCallSettled: true,
  };
}

const eventOf = (p: ReturnType<typeof payment>, id = 'evt_1'): ProviderEvent => ({
  eventId: id,
  type: 'payment.succeeded',
  created: p.created,
  payment: { ...p, status: 'succeeded', amountCaptured: p.amount, amountRefunded: 0 },
});

describe('applyProviderEvent while no provider payment is known', () => {
  it('does not apply another merchant’s payment of the same order and amount', () => {
    const state = stateOfA();
    const theirs = eventOf(payment({ id: 'pay_b', metadata: paymentMetadata(B.merchantId, B.key) }));
    expect(applyProviderEvent(state, theirs, new Date(T0 + 1_000).toISOString())).toBe(false);
    expect(state.view).toMatchObject({ status: 'unknown', amountCaptured: 0 });
    expect(state.view.providerPaymentId).toBeUndefined();
  });
  it('does not apply a payment of this merchant under another key', () => {
    const state = stateOfA();
    const other = eventOf(payment({ id: 'pay_a2', metadata: paymentMetadata(A.merchantId, 'key_other') }));
    expect(applyProviderEvent(state, other, new Date(T0).toISOString())).toBe(false);
    expect(state.view.providerPaymentId).toBeUndefined();
  });
  it('applies its own payment, and one without metadata whose amount, currency and reference are its own', () => {
    const mine = stateOfA();
    expect(
      applyProviderEvent(
        mine,
        eventOf(payment({ id: 'pay_a', metadata: paymentMetadata(A.merchantId, A.key) })),
        new Date(T0).toISOString(),
      ),
    ).toBe(true);
    expect(mine.view).toMatchObject({ status: 'succeeded', providerPaymentId: 'pay_a' });
    const silent = stateOfA();
    expect(applyProviderEvent(silent, eventOf(payment({ id: 'pay_s' })), new Date(T0).toISOString())).toBe(true);
    expect(silent.view.providerPaymentId).toBe('pay_s');
    expect(eventMayBeOurs(stateOfA().view, eventOf(payment({ amount: 2_000 })).payment)).toBe(false);
  });
  it('once a provider payment is known, only events about it apply', () => {
    const state = stateOfA({ providerPaymentId: 'pay_a', status: 'authorized', amountAuthorized: 1_000 });
    expect(eventMayBeOurs(state.view, eventOf(payment({ id: 'pay_a' })).payment)).toBe(true);
    expect(eventMayBeOurs(state.view, eventOf(payment({ id: 'pay_z' })).payment)).toBe(false);
  });
});
