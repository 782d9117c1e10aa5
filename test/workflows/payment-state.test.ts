/**
 * The payment-state rules on their own: what a provider answer, a webhook or a status change does to the payment's
 * state. Unit tests pin the named cases; fast-check properties pin the promises the charge workflow builds on (amounts
 * never shrink, the status never moves backwards, the same answer twice is a no-op, an event id is applied once).
 * Only the exported functions' contracts are tested, so the state may grow fields without these tests changing.
 */
import fc from 'fast-check';
import type { ProviderEvent } from '../../src/domain/definitions';
import { type PaymentStatus, PaymentStatus as PaymentStatusSchema } from '../../src/domain/payment';
import type { ProviderPayment } from '../../src/providers/types';
import {
  ANSWER_MEMORY_MS,
  type PaymentState,
  type PendingReview,
  REFUSALS_LIMIT,
  type SubOperation,
  applyProviderEvent,
  applyProviderPayment,
  forwardStatus,
  initialState,
  keepAnswer,
  recordFirstAnswer,
  recordOperationAnswers,
  refundable,
  reviewOf,
  reviewSatisfied,
  setStatus,
} from '../../src/workflows/payment-state';

const CREATED = '2030-01-01T00:00:00.000Z';
const T1 = '2030-01-01T00:00:01.000Z';
const T2 = '2030-01-01T00:00:02.000Z';
const T3 = '2030-01-01T00:00:03.000Z';
const AMOUNT = 1_000;

function newState(view: Partial<PaymentState['view']> = {}, rest: Partial<PaymentState> = {}): PaymentState {
  return {
    view: {
      key: 'key_1',
      merchantId: 'm_1',
      orderId: 'order_1',
      status: 'pending',
      amount: { value: AMOUNT, currency: 'EUR' },
      amountAuthorized: 0,
      amountCaptured: 0,
      amountRefunded: 0,
      provider: 'simulator',
      attempts: 1,
      createdAt: CREATED,
      updatedAt: CREATED,
      ...view,
    },
    fingerprint: 'fp',
    seenEvents: [],
    subOperations: [],
    firstCallSettled: true,
    ...rest,
  };
}

function payment(over: Partial<ProviderPayment> = {}): ProviderPayment {
  return {
    id: 'pay_1',
    status: 'succeeded',
    amount: AMOUNT,
    amountCaptured: AMOUNT,
    amountRefunded: 0,
    currency: 'EUR',
    reference: 'order_1',
    created: 1_900_000_000,
    ...over,
  };
}

function event(eventId: string, p: ProviderPayment): ProviderEvent {
  const type =
    p.status === 'voided' ? 'payment.voided' : p.status === 'authorized' ? 'payment.authorized' : 'payment.succeeded';
  return { eventId, type, created: p.created, payment: p };
}

const subOperation = (kind: SubOperation['kind'], amount: number, state: SubOperation['state']): SubOperation => ({
  kind,
  key: `${kind}-${amount}-${state}`,
  fingerprint: 'f',
  amount,
  state,
});

const review = (over: Partial<PendingReview> & Pick<PendingReview, 'operation'>): PendingReview => ({
  key: 'k',
  amount: 0,
  expectAtLeast: 0,
  statusBefore: 'authorized',
  ...over,
});

const clone = <T>(x: T): T => structuredClone(x);

/**
 * How far a payment has got. Provider news only ever raises it; `needs_review`, `declined` and `failed` are not on
 * this scale (provider news never moves them).
 */
const RANK: Partial<Record<PaymentStatus, number>> = {
  pending: 0,
  unknown: 0,
  requires_action: 0,
  authorized: 1,
  succeeded: 2,
  voided: 2,
};
const MOVABLE: readonly PaymentStatus[] = ['pending', 'unknown', 'requires_action', 'authorized'];
const PROVIDER_STATUSES = ['requires_action', 'authorized', 'succeeded', 'voided', 'failed'] as const;
/** The provider's statuses that carry money (a payment waiting for the customer or failed there moved none). */
const MONEY_STATUSES = ['authorized', 'succeeded', 'voided'] as const;

// ---------------------------------------------------------------------------------------------------------------

describe('forwardStatus', () => {
  it.each([
    ['pending', 'authorized', 'authorized'],
    ['pending', 'succeeded', 'succeeded'],
    ['pending', 'voided', 'voided'],
    ['unknown', 'authorized', 'authorized'],
    ['unknown', 'succeeded', 'succeeded'],
    ['authorized', 'authorized', 'authorized'],
    ['authorized', 'succeeded', 'succeeded'],
    ['authorized', 'voided', 'voided'],
    // Never backwards, never sideways out of a final or reviewed status.
    ['succeeded', 'authorized', 'succeeded'],
    ['succeeded', 'voided', 'succeeded'],
    ['voided', 'succeeded', 'voided'],
    ['voided', 'authorized', 'voided'],
    ['declined', 'succeeded', 'declined'],
    ['failed', 'succeeded', 'failed'],
    ['needs_review', 'succeeded', 'needs_review'],
    ['needs_review', 'authorized', 'needs_review'],
  ] as const)('%s + provider %s = %s', (ours, theirs, expected) => {
    expect(forwardStatus(ours, theirs)).toBe(expected);
  });

  it('only ever moves forward, and only from pending, unknown or authorized (property)', () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...PaymentStatusSchema.options),
        fc.constantFrom(...PROVIDER_STATUSES),
        (ours, theirs) => {
          const next = forwardStatus(ours, theirs);
          if (!MOVABLE.includes(ours)) {
            expect(next).toBe(ours);
            return;
          }
          if (next === 'declined') {
            // Only a payment that never reached authorized declines: the customer's authentication failed, or it was
            // cancelled while it waited for the customer.
            expect(ours).not.toBe('authorized');
            expect(theirs === 'failed' || (theirs === 'voided' && ours === 'requires_action')).toBe(true);
            return;
          }
          expect(RANK[next]).toBeGreaterThanOrEqual(RANK[ours] as number);
          // The provider's word or ours, nothing invented.
          expect([ours, theirs]).toContain(next);
        },
      ),
    );
  });
});

describe('setStatus', () => {
  it('stamps unknownSince once on entering unknown and keeps it into needs_review', () => {
    const s = newState();
    setStatus(s, 'unknown', T1);
    expect(s.view).toMatchObject({ status: 'unknown', unknownSince: T1, updatedAt: T1 });
    setStatus(s, 'unknown', T2);
    expect(s.view.unknownSince).toBe(T1);
    setStatus(s, 'needs_review', T3, 'not found after 2 checks');
    expect(s.view).toMatchObject({
      status: 'needs_review',
      unknownSince: T1,
      review: { reason: 'not found after 2 checks' },
      updatedAt: T3,
    });
  });

  it('shows what a partial capture or a void released, and nothing while the authorization stands', () => {
    const partial = newState({ status: 'authorized', amountAuthorized: AMOUNT });
    applyProviderPayment(partial, payment({ amountCaptured: 400 }), T1);
    expect(partial.view).toMatchObject({ status: 'succeeded', amountCaptured: 400, amountReleased: 600 });
    const voided = newState({ status: 'authorized', amountAuthorized: AMOUNT });
    expect(voided.view.amountReleased).toBeUndefined();
    applyProviderPayment(voided, payment({ status: 'voided', amountCaptured: 0 }), T1);
    expect(voided.view).toMatchObject({ status: 'voided', amountReleased: AMOUNT });
    const full = newState({ status: 'authorized', amountAuthorized: AMOUNT });
    applyProviderPayment(full, payment(), T1);
    expect(full.view.amountReleased).toBeUndefined();
  });

  it('gives a review a reason even when none is passed', () => {
    const s = newState({ status: 'unknown' });
    setStatus(s, 'needs_review', T1);
    expect(s.view.review).toEqual({ reason: 'outcome unknown' });
  });

  it.each(['authorized', 'succeeded', 'declined', 'failed', 'voided', 'pending'] as const)(
    'leaving for %s drops unknownSince and the review',
    (status) => {
      const s = newState({ status: 'needs_review', unknownSince: T1, review: { reason: 'r' } });
      setStatus(s, status, T2);
      expect(s.view.status).toBe(status);
      expect(s.view.updatedAt).toBe(T2);
      expect(s.view).not.toHaveProperty('unknownSince');
      expect(s.view).not.toHaveProperty('review');
    },
  );

  it('touches nothing but status, unknownSince, review, amountReleased and updatedAt (property)', () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...PaymentStatusSchema.options),
        fc.option(fc.string(), { nil: undefined }),
        (st, r) => {
          const s = newState({
            amountAuthorized: 1_000,
            amountCaptured: 700,
            amountRefunded: 100,
            providerPaymentId: 'p',
          });
          const before = clone(s);
          setStatus(s, st, T1, r);
          const strip = ({
            status,
            unknownSince,
            review: rv,
            amountReleased,
            updatedAt,
            ...v
          }: PaymentState['view']) => {
            void [status, unknownSince, rv, amountReleased, updatedAt];
            return v;
          };
          expect(strip(s.view)).toEqual(strip(before.view));
          expect({ ...s, view: undefined }).toEqual({ ...before, view: undefined });
        },
      ),
    );
  });
});

describe('applyProviderPayment', () => {
  it('learns the provider payment id, the amounts and the status, and stamps the change', () => {
    const s = newState({ status: 'unknown', unknownSince: T1 });
    const changed = applyProviderPayment(s, payment({ amountCaptured: 600, amountRefunded: 100 }), T2);
    expect(changed).toBe(true);
    expect(s.view).toMatchObject({
      providerPaymentId: 'pay_1',
      status: 'succeeded',
      amountAuthorized: AMOUNT,
      amountCaptured: 600,
      amountRefunded: 100,
      updatedAt: T2,
    });
    expect(s.view).not.toHaveProperty('unknownSince');
  });

  it('an older answer changes nothing: amounts do not shrink, succeeded is not taken back to authorized', () => {
    const s = newState({ providerPaymentId: 'pay_1' });
    applyProviderPayment(s, payment({ amountCaptured: 600, amountRefunded: 200 }), T1);
    const after = clone(s);
    const changed = applyProviderPayment(
      s,
      payment({ status: 'authorized', amountCaptured: 0, amountRefunded: 0 }),
      T2,
    );
    expect(changed).toBe(false);
    expect(s).toEqual(after);
  });

  it('does not leave needs_review by the side door, but still records the money the provider shows', () => {
    const s = newState({ status: 'needs_review', review: { reason: 'r' } });
    expect(applyProviderPayment(s, payment(), T1)).toBe(true);
    expect(s.view).toMatchObject({ status: 'needs_review', amountCaptured: AMOUNT, review: { reason: 'r' } });
  });

  it('keeps the first provider payment id it learnt', () => {
    const s = newState({ status: 'authorized', providerPaymentId: 'pay_1' });
    applyProviderPayment(s, payment({ id: 'pay_other', status: 'authorized', amountCaptured: 0 }), T1);
    expect(s.view.providerPaymentId).toBe('pay_1');
  });

  const arbPayment: fc.Arbitrary<ProviderPayment> = fc
    .record({
      status: fc.constantFrom(...MONEY_STATUSES),
      amount: fc.integer({ min: 0, max: 10_000 }),
      captured: fc.integer({ min: 0, max: 10_000 }),
      refunded: fc.integer({ min: 0, max: 10_000 }),
    })
    .map(({ status, amount, captured, refunded }) =>
      payment({ status, amount, amountCaptured: captured, amountRefunded: refunded }),
    );
  const arbStart = fc.constantFrom<PaymentStatus>('pending', 'unknown', 'authorized', 'needs_review');

  it('amounts never decrease and the status never moves backwards, whatever order answers come in (property)', () => {
    fc.assert(
      fc.property(arbStart, fc.array(arbPayment, { maxLength: 12 }), (start, answers) => {
        const s = newState({ status: start });
        for (const [i, p] of answers.entries()) {
          const before = clone(s.view);
          applyProviderPayment(s, p, `2030-01-01T00:01:${String(i).padStart(2, '0')}.000Z`);
          expect(s.view.amountAuthorized).toBeGreaterThanOrEqual(before.amountAuthorized);
          expect(s.view.amountCaptured).toBeGreaterThanOrEqual(before.amountCaptured);
          expect(s.view.amountRefunded).toBeGreaterThanOrEqual(before.amountRefunded);
          // What the provider showed is never under-reported.
          expect(s.view.amountCaptured).toBeGreaterThanOrEqual(p.amountCaptured);
          expect(s.view.amountRefunded).toBeGreaterThanOrEqual(p.amountRefunded);
          if (before.status === 'needs_review') expect(s.view.status).toBe('needs_review');
          else expect(RANK[s.view.status]).toBeGreaterThanOrEqual(RANK[before.status] as number);
        }
      }),
    );
  });

  it('the same answer twice: the second application is a no-op and says so (property)', () => {
    fc.assert(
      fc.property(arbStart, fc.array(arbPayment, { maxLength: 6 }), arbPayment, (start, earlier, p) => {
        const s = newState({ status: start });
        for (const e of earlier) applyProviderPayment(s, e, T1);
        applyProviderPayment(s, p, T2);
        const once = clone(s);
        expect(applyProviderPayment(s, p, T3)).toBe(false);
        expect(s).toEqual(once);
      }),
    );
  });

  it('says it changed something exactly when the view changed, and then stamps updatedAt (property)', () => {
    fc.assert(
      fc.property(arbStart, arbPayment, arbPayment, (start, first, second) => {
        const s = newState({ status: start });
        applyProviderPayment(s, first, T1);
        const before = clone(s.view);
        const changed = applyProviderPayment(s, second, T2);
        const { updatedAt: a, ...restBefore } = before;
        const { updatedAt: b, ...restAfter } = s.view;
        expect(changed).toBe(JSON.stringify(restBefore) !== JSON.stringify(restAfter));
        expect(b).toBe(changed ? T2 : a);
      }),
    );
  });
});

describe('reviewSatisfied', () => {
  it('is undefined without a pending review', () => {
    expect(reviewSatisfied(newState({ status: 'succeeded', providerPaymentId: 'pay_1', amountCaptured: AMOUNT }))).toBe(
      undefined,
    );
  });

  it('a create review is settled by any provider payment: succeeded if captured, else authorized', () => {
    const r = { pendingReview: review({ operation: 'create', statusBefore: 'unknown' }) };
    expect(reviewSatisfied(newState({ status: 'needs_review' }, r))).toBeUndefined();
    expect(reviewSatisfied(newState({ status: 'needs_review', providerPaymentId: 'pay_1' }, r))).toBe('authorized');
    expect(
      reviewSatisfied(newState({ status: 'needs_review', providerPaymentId: 'pay_1', amountCaptured: 1 }, r)),
    ).toBe('succeeded');
  });

  it('a capture review is settled only once the provider shows at least the expected capture', () => {
    const r = { pendingReview: review({ operation: 'capture', amount: 400, expectAtLeast: 700 }) };
    const base = { status: 'needs_review' as const, providerPaymentId: 'pay_1', amountAuthorized: AMOUNT };
    expect(reviewSatisfied(newState({ ...base, amountCaptured: 300 }, r))).toBeUndefined();
    expect(reviewSatisfied(newState({ ...base, amountCaptured: 699 }, r))).toBeUndefined();
    expect(reviewSatisfied(newState({ ...base, amountCaptured: 700 }, r))).toBe('succeeded');
    // A refund the provider shows does not settle a capture.
    expect(reviewSatisfied(newState({ ...base, amountCaptured: 300, amountRefunded: 900 }, r))).toBeUndefined();
  });

  it('a refund review is settled only once the provider shows at least the expected refunds', () => {
    const r = {
      pendingReview: review({ operation: 'refund', amount: 300, expectAtLeast: 500, statusBefore: 'succeeded' }),
    };
    const base = { status: 'needs_review' as const, providerPaymentId: 'pay_1', amountCaptured: AMOUNT };
    expect(reviewSatisfied(newState({ ...base, amountRefunded: 200 }, r))).toBeUndefined();
    expect(reviewSatisfied(newState({ ...base, amountRefunded: 499 }, r))).toBeUndefined();
    expect(reviewSatisfied(newState({ ...base, amountRefunded: 500 }, r))).toBe('succeeded');
  });

  it('settles a capture/refund review exactly at the expected total, never below it (property)', () => {
    fc.assert(
      fc.property(
        fc.constantFrom('capture' as const, 'refund' as const),
        fc.integer({ min: 1, max: 100_000 }),
        fc.integer({ min: 0, max: 200_000 }),
        (operation, expectAtLeast, shown) => {
          const s = newState(
            {
              status: 'needs_review',
              providerPaymentId: 'pay_1',
              amountCaptured: operation === 'capture' ? shown : 200_000,
              amountRefunded: operation === 'refund' ? shown : 0,
            },
            { pendingReview: review({ operation, expectAtLeast }) },
          );
          expect(reviewSatisfied(s)).toBe(shown >= expectAtLeast ? 'succeeded' : undefined);
        },
      ),
    );
  });
});

describe('applyProviderEvent', () => {
  it('applies a new event like a provider answer and remembers its id', () => {
    const s = newState({ status: 'authorized', providerPaymentId: 'pay_1', amountAuthorized: AMOUNT });
    expect(applyProviderEvent(s, event('evt_1', payment()), T1)).toBe(true);
    expect(s.view).toMatchObject({ status: 'succeeded', amountCaptured: AMOUNT, updatedAt: T1 });
    expect(s.seenEvents).toContain('evt_1');
  });

  it('applies an event id once, even where applying it again would change the payment', () => {
    const s = newState({ status: 'authorized', providerPaymentId: 'pay_1', amountAuthorized: AMOUNT });
    const captured = event('evt_1', payment());
    applyProviderEvent(s, captured, T1);
    // An operator's "the capture failed" puts the payment back to authorized (resolve): the same event, redelivered,
    // would capture it again if it were not recognised.
    setStatus(s, 'authorized', T2);
    s.view.amountCaptured = 0;
    const before = clone(s);
    expect(applyProviderEvent(s, captured, T3)).toBe(false);
    expect(s).toEqual(before);
    // The same payment under a new event id is news.
    expect(applyProviderEvent(s, event('evt_2', payment()), T3)).toBe(true);
    expect(s.view.status).toBe('succeeded');
  });

  it('ignores an event about another provider payment than the one this payment is', () => {
    const s = newState({ status: 'authorized', providerPaymentId: 'pay_1', amountAuthorized: AMOUNT });
    const view = clone(s.view);
    expect(applyProviderEvent(s, event('evt_x', payment({ id: 'pay_other' })), T1)).toBe(false);
    expect(s.view).toEqual(view);
  });

  it('adopts the provider payment id from an event that arrives before the create answer', () => {
    const s = newState({ status: 'pending' });
    expect(applyProviderEvent(s, event('evt_1', payment()), T1)).toBe(true);
    expect(s.view).toMatchObject({ providerPaymentId: 'pay_1', status: 'succeeded' });
  });

  const arbEvent = fc
    .record({
      id: fc.constantFrom('evt_a', 'evt_b', 'evt_c', 'evt_d'),
      status: fc.constantFrom(...PROVIDER_STATUSES),
      captured: fc.integer({ min: 0, max: AMOUNT }),
      refunded: fc.integer({ min: 0, max: AMOUNT }),
    })
    .map(({ id, status, captured, refunded }) =>
      event(id, payment({ status, amountCaptured: captured, amountRefunded: refunded })),
    );

  it('an event id applied twice changes nothing the second time, whatever happened in between (property)', () => {
    fc.assert(
      fc.property(
        fc.array(arbEvent, { minLength: 1, maxLength: 10 }),
        fc.constantFrom(...PaymentStatusSchema.options),
        (events, resetTo) => {
          const s = newState({ status: 'pending' });
          for (const e of events) applyProviderEvent(s, e, T1);
          // Whatever the payment went through since (a review, an operator's verdict), a seen event stays seen.
          setStatus(s, resetTo, T2);
          s.view.amountCaptured = 0;
          s.view.amountRefunded = 0;
          const before = clone(s);
          for (const e of events) expect(applyProviderEvent(s, e, T3)).toBe(false);
          expect(s).toEqual(before);
        },
      ),
    );
  });

  it('a redelivered stream ends where the same stream delivered once ends (property)', () => {
    fc.assert(
      fc.property(
        fc.array(arbEvent, { minLength: 1, maxLength: 6 }),
        fc.array(fc.nat(), { maxLength: 16 }),
        (distinct, picks) => {
          // Each event is delivered at least once, in order, with redeliveries of earlier ones in between.
          const events = distinct.map((e, i) => ({ ...e, eventId: `evt_${i}` }));
          const deliveries = events.flatMap((e, i) => [
            e,
            ...picks.slice(i * 2, i * 2 + 2).map((n) => events[n % (i + 1)] as ProviderEvent),
          ]);
          const redelivered = newState();
          const once = newState();
          for (const e of deliveries) applyProviderEvent(redelivered, e, T1);
          for (const e of events) applyProviderEvent(once, e, T1);
          expect(redelivered.view).toEqual(once.view);
          expect([...redelivered.seenEvents].sort()).toEqual(events.map((e) => e.eventId).sort());
        },
      ),
    );
  });
});

describe('refundable', () => {
  it('is what was captured, minus what was refunded, minus refunds still running', () => {
    const s = newState(
      { status: 'succeeded', amountCaptured: 1_000, amountRefunded: 200 },
      {
        subOperations: [
          subOperation('refund', 300, 'running'),
          subOperation('refund', 50, 'running'),
          subOperation('refund', 400, 'rejected'), // nothing moved
          subOperation('capture', 1_000, 'running'), // not a refund
        ],
      },
    );
    expect(refundable(s)).toBe(1_000 - 200 - 300 - 50);
  });

  it('is zero once everything captured was refunded, and nothing before a capture', () => {
    expect(refundable(newState({ status: 'succeeded', amountCaptured: 700, amountRefunded: 700 }))).toBe(0);
    expect(refundable(newState({ status: 'authorized', amountAuthorized: 1_000 }))).toBe(0);
  });

  it('running refunds plus what is refundable never exceed what is left of the capture (property)', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 100_000 }),
        fc.array(fc.integer({ min: 1, max: 10_000 }), { maxLength: 8 }),
        fc.array(fc.integer({ min: 1, max: 10_000 }), { maxLength: 4 }),
        (captured, refunds, rejected) => {
          // Refunds accepted one at a time, each within what refundable() allowed at that moment.
          const s = newState({ status: 'succeeded', amountCaptured: captured });
          for (const amount of rejected) s.subOperations.push(subOperation('refund', amount, 'rejected'));
          for (const amount of refunds) {
            if (amount > refundable(s)) continue;
            s.subOperations.push(subOperation('refund', amount, 'running'));
          }
          const running = s.subOperations
            .filter((o) => o.kind === 'refund' && o.state === 'running')
            .reduce((sum, o) => sum + o.amount, 0);
          expect(refundable(s)).toBeGreaterThanOrEqual(0);
          expect(running + refundable(s)).toBe(captured);
        },
      ),
    );
  });
});

describe('refundable with refunds that know their total before', () => {
  it('counts a running refund once when its webhook already raised the refunded total', () => {
    const running = { ...subOperation('refund', 600, 'running'), totalBefore: 0 };
    const before = newState({ status: 'succeeded', amountCaptured: 1_000 }, { subOperations: [running] });
    expect(refundable(before)).toBe(400);
    const shown = newState(
      { status: 'succeeded', amountCaptured: 1_000, amountRefunded: 600 },
      { subOperations: [running] },
    );
    expect(refundable(shown)).toBe(400);
  });

  it('is captured minus the larger of what is shown and what the running refunds may reach (property)', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 5_000 }),
        fc.integer({ min: 1, max: 5_000 }),
        fc.boolean(),
        (b, a, shown) => {
          const op = { ...subOperation('refund', a, 'running'), totalBefore: b };
          const s = newState(
            { status: 'succeeded', amountCaptured: 20_000, amountRefunded: shown ? b + a : b },
            { subOperations: [op] },
          );
          expect(refundable(s)).toBe(20_000 - b - a);
        },
      ),
    );
  });
});

describe('reviewOf', () => {
  it('expects the total before the operation plus its amount, not the view’s total (a webhook may have applied it)', () => {
    const view = newState({ status: 'succeeded', amountCaptured: 1_000 }).view;
    const op = { ...subOperation('capture', 1_000, 'needs_review'), totalBefore: 0 };
    expect(reviewOf(op, view)).toMatchObject({ operation: 'capture', expectAtLeast: 1_000, statusBefore: 'succeeded' });
    // An operation recorded before totalBefore existed keeps the old rule.
    expect(reviewOf(subOperation('capture', 1_000, 'needs_review'), view).expectAtLeast).toBe(2_000);
    expect(reviewOf(subOperation('void', 1_000, 'needs_review'), view).expectAtLeast).toBe(0);
  });
});

describe('keepAnswer', () => {
  const answer = (i: number, atMs: number) => ({ requestId: `r${i}`, atMs });

  it('keeps every answer younger than the memory, however many come at once', () => {
    const list: { requestId: string; atMs: number }[] = [];
    for (let i = 0; i < 100; i += 1) keepAnswer(list, answer(i, 1_000), 1_000);
    expect(list).toHaveLength(100);
    expect(list[0]?.requestId).toBe('r0');
  });

  it('drops the old ones beyond the limit, oldest first', () => {
    const list: { requestId: string; atMs?: number }[] = [];
    for (let i = 0; i < 40; i += 1) keepAnswer(list, answer(i, 0), 0);
    keepAnswer(list, answer(40, ANSWER_MEMORY_MS), ANSWER_MEMORY_MS);
    expect(list).toHaveLength(REFUSALS_LIMIT);
    expect(list.at(-1)?.requestId).toBe('r40');
    // Answers kept before they carried a time count as old.
    const legacy: { requestId: string; atMs?: number }[] = Array.from({ length: 40 }, (_, i) => ({
      requestId: `l${i}`,
    }));
    keepAnswer(legacy, answer(99, 5), 5);
    expect(legacy).toHaveLength(REFUSALS_LIMIT);
  });
});

describe('the answers repeats replay', () => {
  const input = {
    merchantId: 'm_1',
    key: 'key_1',
    fingerprint: 'fp',
    request: { orderId: 'order_1', amount: { value: AMOUNT, currency: 'EUR' }, provider: 'simulator' },
  };

  it('records the charge’s first final answer once: not while pending or unknown, never overwritten', () => {
    const s = initialState(input, CREATED);
    recordFirstAnswer(s);
    expect(s.firstAnswer).toBeNull();
    s.firstCallSettled = true;
    setStatus(s, 'unknown', T1);
    recordFirstAnswer(s);
    expect(s.firstAnswer).toBeNull();
    applyProviderPayment(s, payment({ status: 'authorized', amountCaptured: 0 }), T2);
    recordFirstAnswer(s);
    expect(s.firstAnswer).toMatchObject({ status: 'authorized', amountCaptured: 0, updatedAt: T2 });
    applyProviderPayment(s, payment(), T3);
    recordFirstAnswer(s);
    expect(s.firstAnswer).toMatchObject({ status: 'authorized', amountCaptured: 0 });
    expect(s.view.status).toBe('succeeded');
  });

  it('records nothing for state carried from a run that did not record answers', () => {
    const s = newState({ status: 'succeeded', amountAuthorized: AMOUNT, amountCaptured: AMOUNT });
    recordFirstAnswer(s);
    expect(s).not.toHaveProperty('firstAnswer');
    const carried: SubOperation = { kind: 'refund', key: 'r0', fingerprint: 'f', amount: 1, state: 'done' };
    s.subOperations.push(carried);
    recordOperationAnswers(s);
    expect(carried).not.toHaveProperty('answer');
  });

  it('records each capture’s or refund’s view when it succeeded, a copy later changes do not touch', () => {
    const s = newState({ status: 'succeeded', amountAuthorized: AMOUNT, amountCaptured: AMOUNT });
    const refund: SubOperation = {
      kind: 'refund',
      key: 'r1',
      fingerprint: 'f',
      amount: 300,
      state: 'running',
      answer: null,
    };
    s.subOperations.push(refund);
    recordOperationAnswers(s);
    expect(refund.answer).toBeNull();
    refund.state = 'done';
    s.view.amountRefunded = 300;
    recordOperationAnswers(s);
    s.view.amountRefunded = 500;
    recordOperationAnswers(s);
    expect(refund.answer).toMatchObject({ amountRefunded: 300 });
  });
});
