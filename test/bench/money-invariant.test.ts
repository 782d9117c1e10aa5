import { type InvariantInput, checkMoneyInvariant } from '../../bench/money-invariant';
import { providerIdempotencyKey } from '../../src/activities/keys';
import type { LedgerEffect, LedgerRequest } from '../../src/simulator/server';

const m = 'm1';
const pk = (op: 'create' | 'capture' | 'refund', key: string) => providerIdempotencyKey(m, op, key);
const effect = (
  operation: LedgerEffect['operation'],
  key: string,
  amount: number,
  paymentId = 'pay_1',
): LedgerEffect => ({
  api_key: 'sk',
  operation,
  idempotency_key: key,
  reference: 'order-1',
  payment_id: paymentId,
  amount,
  at: 0,
});
const request = (operation: LedgerRequest['operation'], key: string): LedgerRequest => ({
  api_key: 'sk',
  operation,
  idempotency_key: key,
  reference: 'order-1',
  at: 0,
  status: 200,
});
const authorized = {
  status: 'authorized',
  amountAuthorized: 1_000,
  amountCaptured: 0,
  amountRefunded: 0,
  providerPaymentId: 'pay_1',
};
const problems = (input: Partial<InvariantInput>) =>
  checkMoneyInvariant({ payments: [], answers: [], ledger: { effects: [] }, ...input }).map(
    (p) => `${p.kind} ${p.message}`,
  );

describe('the money invariant every ledger harness holds (bench/money-invariant.ts)', () => {
  it('rule 2: a payment answered or shown failed, or failed over, while the provider holds its create', () => {
    const effects = [effect('create', pk('create', 'k1'), 1_000)];
    const failed = { ...authorized, status: 'failed', amountAuthorized: 0, failureReason: 'provider_unavailable' };
    const found = problems({
      payments: [{ merchantId: m, key: 'k1', capture: 'manual', final: failed }],
      answers: [
        {
          merchantId: m,
          paymentKey: 'k1',
          kind: 'charge',
          opKey: 'k1',
          amount: 1_000,
          status: 200,
          bodyStatus: 'failed',
        },
      ],
      ledger: { effects },
    });
    expect(found.filter((p) => p.startsWith('mismatch 2:'))).toHaveLength(2);
    const failedOver = problems({
      payments: [{ merchantId: m, key: 'k1', capture: 'manual', final: { ...authorized, failovers: [{}] } }],
      ledger: { effects },
    });
    expect(failedOver.join('\n')).toContain('2: m1/k1 failed over while the provider holds its create pay_1');
  });

  it('rule 3: a resolution that records money the provider does not show', () => {
    const found = problems({
      payments: [
        {
          merchantId: m,
          key: 'k1',
          capture: 'manual',
          final: {
            ...authorized,
            status: 'succeeded',
            amountCaptured: 1_000,
            operations: [{ kind: 'capture', key: 'c1', state: 'succeeded' }],
          },
        },
      ],
      ledger: { effects: [effect('create', pk('create', 'k1'), 1_000)] },
    });
    expect(found).toEqual([
      'mismatch 3: m1/k1 (succeeded): view {"authorized":1000,"captured":1000,"refunded":0} but the provider {"authorized":1000,"captured":0,"refunded":0}',
      "mismatch 3: m1/k1 is succeeded, but the provider's payment says authorized",
      'mismatch 3: m1/k1: capture c1 is succeeded, but the provider has no capture under its key',
    ]);
  });

  it('rule 5: a repeat of a settled key answered 409 payment_in_flight naming another key', () => {
    const found = problems({
      answers: [
        {
          merchantId: m,
          paymentKey: 'k1',
          kind: 'charge',
          opKey: 'k1',
          amount: 1_000,
          status: 200,
          bodyStatus: 'declined',
        },
        {
          merchantId: m,
          paymentKey: 'k2',
          kind: 'charge',
          opKey: 'k2',
          amount: 1_000,
          status: 202,
          bodyStatus: 'pending',
        },
        {
          merchantId: m,
          paymentKey: 'k1',
          kind: 'charge',
          opKey: 'k1',
          amount: 1_000,
          status: 409,
          errorType: 'payment_in_flight',
          namedKey: 'k2',
        },
      ],
    });
    expect(found).toEqual([
      'mismatch 5: m1/k1: charge k1 answered 409 payment_in_flight naming k2, after a 200 for the same key',
    ]);
  });

  it('rule 4: a key every answer refused has no effect, but a 503 unavailable is no answer (repeat), not a refusal', () => {
    const capture = (status: number, errorType: string) => ({
      merchantId: m,
      paymentKey: 'k1',
      kind: 'capture' as const,
      opKey: 'c1',
      amount: 1_000,
      status,
      errorType,
    });
    const ledger = {
      effects: [effect('create', pk('create', 'k1'), 1_000), effect('capture', pk('capture', 'c1'), 1_000)],
    };
    expect(problems({ answers: [capture(409, 'invalid_transition')], ledger })).toEqual([
      'mismatch 4: m1/k1: capture c1 answered 409 invalid_transition, every answer refused it, yet the provider did it',
    ]);
    // The soak's 1,000 run: during a provider outage on a loaded cluster, captures answered only 503 `unavailable`
    // (queries timed out) until the soak stopped repeating; the provider had them, and the views said so.
    expect(problems({ answers: [capture(503, 'unavailable')], ledger })).toEqual([]);
    // `provider_unavailable` promises the request never left: an effect under its key is a broken promise.
    expect(problems({ answers: [capture(503, 'provider_unavailable')], ledger })).toEqual([
      'mismatch 4: m1/k1: capture c1 answered 503 provider_unavailable, every answer refused it, yet the provider did it',
    ]);
  });

  it('rule 6: a capture in review that never reached the provider; one that did is the provider\u2019s to tell', () => {
    const inReview = {
      ...authorized,
      status: 'needs_review',
      review: { reason: 'capture not found after 2 checks' },
      operations: [{ kind: 'capture', key: 'c1', state: 'needs_review', reason: 'not found after 2 checks' }],
    };
    const input = {
      payments: [{ merchantId: m, key: 'k1', capture: 'manual' as const, final: inReview }],
      ledger: {
        effects: [effect('create', pk('create', 'k1'), 1_000)],
        requests: [request('create', pk('create', 'k1'))],
      },
    };
    expect(problems(input)).toEqual([
      'mismatch 6: m1/k1: capture c1 never reached the provider (no request under its key), yet it is in review as an unknown outcome (not found after 2 checks)',
    ]);
    const reached = {
      ...input,
      ledger: { ...input.ledger, requests: [...input.ledger.requests, request('capture', pk('capture', 'c1'))] },
    };
    expect(problems(reached)).toEqual([]);
  });

  it('rule 7: with every review resolved, a payment still in review is stuck', () => {
    const inReview = { ...authorized, status: 'needs_review', review: { reason: 'x' } };
    const input = {
      payments: [{ merchantId: m, key: 'k1', capture: 'manual' as const, final: inReview }],
      ledger: { effects: [effect('create', pk('create', 'k1'), 1_000)] },
    };
    expect(problems(input)).toEqual([]);
    expect(problems({ ...input, reviewsResolved: true })).toEqual([
      'stuck 7: m1/k1 stays needs_review after every review was resolved',
    ]);
  });

  it('rule 8: a payment declined after waiting for the customer moved nothing, and an expired one was cancelled', () => {
    const expired = {
      status: 'declined',
      declineCode: 'action_expired',
      amountAuthorized: 0,
      amountCaptured: 0,
      amountRefunded: 0,
      providerPaymentId: 'pay_3ds',
    };
    const cancel = effect('void', 'void-key', 0, 'pay_3ds');
    const of = (final: typeof expired, effects: LedgerEffect[]) =>
      problems({ payments: [{ merchantId: m, key: 'k8', capture: 'automatic', final }], ledger: { effects } });
    // Holds: cancelled at the provider, nothing charged; a failed authentication needs no cancel.
    expect(of(expired, [cancel])).toEqual([]);
    expect(of({ ...expired, declineCode: 'authentication_failed' }, [])).toEqual([]);
    // Broken: expired without a cancel; a cancel that released money; a view that shows money.
    expect(of(expired, [])).toEqual([expect.stringMatching(/^mismatch 8: .* never cancelled/)]);
    expect(of(expired, [{ ...cancel, amount: 1_000 }])).toEqual([expect.stringMatching(/^mismatch 8: .* moved/)]);
    expect(of({ ...expired, amountAuthorized: 1_000 }, [cancel])).toEqual([
      expect.stringMatching(/^mismatch 8: .* shows money/),
    ]);
    // Still waiting at the end is stuck (rule 7).
    expect(of({ ...expired, status: 'requires_action' }, [])).toEqual([
      expect.stringMatching(/^stuck 7: .* stays requires_action/),
    ]);
  });
});
