import {
  chargeAnswers,
  chargeState,
  checkSoak,
  neverStarted,
  stateOf,
  type SoakAnswer,
  type SoakPayment,
  type SoakView,
} from '../../bench/soak-check';
import { providerIdempotencyKey } from '../../src/activities/keys';
import type { LedgerEffect } from '../../src/simulator/server';

const merchant = 'm1';
const manual: SoakPayment = { key: 'p1', orderId: 'order-p1', amount: 1_000, capture: 'manual', declines: false };
const auto: SoakPayment = { key: 'p2', orderId: 'order-p2', amount: 2_000, capture: 'automatic', declines: false };

const effect = (
  operation: LedgerEffect['operation'],
  reference: string,
  amount: number,
  key: string,
): LedgerEffect => ({
  api_key: 'sk',
  operation,
  idempotency_key: key,
  reference,
  payment_id: `pay_${reference}`,
  amount,
  at: 0,
});
const pk = (op: 'create' | 'capture' | 'refund', key: string) => providerIdempotencyKey(merchant, op, key);

/** A clean run: p1 authorized, captured 600, refunded 200; p2 charged and refunded 500. */
const cleanEffects = (): LedgerEffect[] => [
  effect('create', 'order-p1', 1_000, pk('create', 'p1')),
  effect('capture', 'order-p1', 600, pk('capture', 'p1-cap')),
  effect('refund', 'order-p1', 200, pk('refund', 'p1-ref1')),
  effect('create', 'order-p2', 2_000, pk('create', 'p2')),
  effect('refund', 'order-p2', 500, pk('refund', 'p2-ref1')),
];
const settled = { status: 'succeeded' } as const;
const cleanViews = (): Map<string, SoakView> =>
  new Map<string, SoakView>([
    [
      'p1',
      {
        ...settled,
        amountAuthorized: 1_000,
        amountCaptured: 600,
        amountRefunded: 200,
        providerPaymentId: 'pay_order-p1',
      },
    ],
    [
      'p2',
      {
        ...settled,
        amountAuthorized: 2_000,
        amountCaptured: 2_000,
        amountRefunded: 500,
        providerPaymentId: 'pay_order-p2',
      },
    ],
  ]);
const cleanAnswers = (): SoakAnswer[] => [
  {
    payment: 'p1',
    kind: 'charge',
    opKey: 'p1',
    amount: 1_000,
    status: 200,
    bodyStatus: 'authorized',
    amountAuthorized: 1_000,
  },
  { payment: 'p1', kind: 'capture', opKey: 'p1-cap', amount: 600, status: 200, bodyStatus: 'succeeded' },
  { payment: 'p1', kind: 'refund', opKey: 'p1-ref1', amount: 200, status: 200, bodyStatus: 'succeeded' },
  {
    payment: 'p2',
    kind: 'charge',
    opKey: 'p2',
    amount: 2_000,
    status: 200,
    bodyStatus: 'succeeded',
    amountAuthorized: 2_000,
  },
  { payment: 'p2', kind: 'refund', opKey: 'p2-ref1', amount: 500, status: 202, bodyStatus: 'succeeded' },
];
const check = (effects = cleanEffects(), views = cleanViews(), answers = cleanAnswers()) =>
  checkSoak(merchant, [manual, auto], answers, views, { effects });

describe('the soak verdict (bench/soak-check.ts)', () => {
  it('finds nothing wrong in a clean run', () => {
    expect(check()).toMatchObject({ payments: 2, doubleEffects: 0, stuck: 0, mismatches: 0, problems: [] });
  });

  it('counts a second create and a second capture under one key as double effects', () => {
    const effects = [
      ...cleanEffects(),
      effect('create', 'order-p2', 2_000, pk('create', 'p2')),
      effect('capture', 'order-p1', 600, pk('capture', 'p1-cap')),
    ];
    const v = check(effects);
    // Two keys repeated (create p2, capture p1-cap), and p1 captured 1200 > authorized 1000 at the provider.
    expect(v.doubleEffects).toBe(3);
  });

  it('counts a refund over what was captured as a double effect', () => {
    const v = check([...cleanEffects(), effect('refund', 'order-p1', 500, pk('refund', 'p1-ref2'))]);
    expect(v.doubleEffects).toBe(1);
    expect(v.problems.join('\n')).toContain('refunded 700 > captured 600');
    // ... and p1's view no longer equals the provider's.
    expect(v.mismatches).toBe(1);
  });

  it('counts pending, unknown, running operations, an unread view and a review without reason as stuck', () => {
    const views = cleanViews();
    views.set('p1', {
      status: 'succeeded',
      amountAuthorized: 1_000,
      amountCaptured: 600,
      amountRefunded: 200,
      operations: [{ kind: 'refund', key: 'p1-ref2', state: 'running' }],
    });
    views.set('p2', { error: 'timeout' });
    expect(check(cleanEffects(), views).stuck).toBe(2);
    views.set('p1', { status: 'needs_review', amountAuthorized: 0, amountCaptured: 0, amountRefunded: 0 });
    views.set('p2', { status: 'unknown', amountAuthorized: 0, amountCaptured: 0, amountRefunded: 0 });
    expect(check(cleanEffects(), views).stuck).toBe(2);
    views.set('p1', {
      status: 'needs_review',
      amountAuthorized: 0,
      amountCaptured: 0,
      amountRefunded: 0,
      review: { reason: 'capture not found' },
    });
    expect(check(cleanEffects(), views)).toMatchObject({ stuck: 1, needsReview: 1 });
  });

  it('counts a view that differs from the ledger as a mismatch', () => {
    const views = cleanViews();
    views.set('p1', { ...(views.get('p1') as object), amountCaptured: 1_000 } as SoakView);
    expect(check(cleanEffects(), views).mismatches).toBe(1);
  });

  it('counts an answer that contradicts the ledger as a mismatch: a 200 without its effect, a refusal with one', () => {
    const answers = cleanAnswers();
    answers.push({
      payment: 'p2',
      kind: 'refund',
      opKey: 'p2-ref9',
      amount: 100,
      status: 200,
      bodyStatus: 'succeeded',
    });
    answers.push({
      payment: 'p1',
      kind: 'refund',
      opKey: 'p1-ref1',
      amount: 200,
      status: 422,
      errorType: 'provider_rejected',
    });
    // The 200 without an effect (4); the refusal with an effect (4), which also contradicts the key's earlier 200 (5).
    expect(check(cleanEffects(), cleanViews(), answers).mismatches).toBe(3);
  });

  it('a refused charge (4xx) has no view to wait for, and must have no create effect', () => {
    const refused: SoakPayment = { key: 'p3', orderId: 'order-p3', amount: 100, capture: 'automatic', declines: false };
    const answers: SoakAnswer[] = [
      ...cleanAnswers(),
      { payment: 'p3', kind: 'charge', opKey: 'p3', amount: 100, status: 409, errorType: 'payment_in_flight' },
    ];
    expect(
      checkSoak(merchant, [manual, auto, refused], answers, cleanViews(), { effects: cleanEffects() }),
    ).toMatchObject({ stuck: 0, mismatches: 0 });
    const withEffect = [...cleanEffects(), effect('create', 'order-p3', 100, pk('create', 'p3'))];
    expect(
      checkSoak(merchant, [manual, auto, refused], answers, cleanViews(), { effects: withEffect }).mismatches,
    ).toBe(1);
  });

  it('a charge answered 503 (never 4xx) is no refusal: without a view it is stuck, never read', () => {
    const unanswered: SoakPayment = {
      key: 'p4',
      orderId: 'order-p4',
      amount: 100,
      capture: 'automatic',
      declines: false,
    };
    const refused: SoakPayment = { key: 'p3', orderId: 'order-p3', amount: 100, capture: 'automatic', declines: false };
    const answers: SoakAnswer[] = [
      ...cleanAnswers(),
      { payment: 'p3', kind: 'charge', opKey: 'p3', amount: 100, status: 422, errorType: 'invalid_request' },
      { payment: 'p4', kind: 'charge', opKey: 'p4', amount: 100, status: 503, errorType: 'unavailable' },
    ];
    const v = checkSoak(merchant, [manual, auto, refused, unanswered], answers, cleanViews(), {
      effects: cleanEffects(),
    });
    expect(v.stuck).toBe(1);
    expect(v.problems).toEqual([expect.stringMatching(/^stuck: .*p4.*never read/)]);
    // A payment the soak gave up on before any answer is no refusal either.
    const silent: SoakPayment = { ...unanswered, key: 'p5', orderId: 'order-p5' };
    const w = checkSoak(merchant, [manual, auto, refused, silent], answers.slice(0, -1), cleanViews(), {
      effects: cleanEffects(),
    });
    expect(w.problems).toEqual([expect.stringMatching(/^stuck: .*p5.*never read/)]);
  });

  it('a charge answered 503 then 409 is read, and stuck unless the API knows no such payment once everything settled', () => {
    const raced: SoakPayment = { key: 'p6', orderId: 'order-race', amount: 100, capture: 'automatic', declines: false };
    const answers: SoakAnswer[] = [
      ...cleanAnswers(),
      { payment: 'p6', kind: 'charge', opKey: 'p6', amount: 100, status: 503, errorType: 'unavailable' },
      { payment: 'p6', kind: 'charge', opKey: 'p6', amount: 100, status: 409, errorType: 'payment_in_flight' },
    ];
    const viewsWith = (final: SoakView) => new Map([...cleanViews(), ['p6', final]]);
    // Not found after quiescence: its start never happened (the 503 hid none), so nothing is stuck.
    expect(
      checkSoak(merchant, [manual, auto, raced], answers, viewsWith({ error: 'not found' }), {
        effects: cleanEffects(),
      }),
    ).toMatchObject({ stuck: 0, mismatches: 0 });
    expect(neverStarted(chargeAnswers(answers), 'p6', { error: 'not found' })).toBe(true);
    // Any other failure to read it is still stuck; and a charge for it at the provider is still a mismatch.
    expect(
      checkSoak(merchant, [manual, auto, raced], answers, viewsWith({ error: 'GET answered 503' }), {
        effects: cleanEffects(),
      }).stuck,
    ).toBe(1);
    const withEffect = [...cleanEffects(), effect('create', 'order-race', 100, pk('create', 'p6'))];
    expect(
      checkSoak(merchant, [manual, auto, raced], answers, viewsWith({ error: 'not found' }), { effects: withEffect })
        .mismatches,
    ).toBeGreaterThan(0);
    // A 2xx among its answers: it started, so a 404 is stuck.
    const started = [...answers.slice(0, -2), { ...answers.at(-2)!, status: 202 }, answers.at(-1)!];
    expect(neverStarted(chargeAnswers(started), 'p6', { error: 'not found' })).toBe(false);
  });

  it('chargeState: refused only when every answer is 4xx; unanswered when none came or the last is a 5xx', () => {
    const s = (...statuses: number[]) => chargeState(statuses.map((status) => ({ status })));
    expect(s(409)).toBe('refused');
    expect(s(422, 409)).toBe('refused');
    expect(s()).toBe('unanswered');
    expect(s(503)).toBe('unanswered');
    expect(s(500)).toBe('unanswered');
    expect(s(200, 503)).toBe('unanswered');
    expect(s(503, 409)).toBe('taken');
    expect(s(503, 202)).toBe('taken');
    expect(s(200)).toBe('taken');
    expect(s(202)).toBe('taken');
  });

  it("stateOf: a payment's chargeState among the charges by payment; one with no answers is unanswered", () => {
    const charges = chargeAnswers([
      { payment: 'p1', kind: 'charge', opKey: 'p1', amount: 1_000, status: 409 },
      { payment: 'p2', kind: 'charge', opKey: 'p2', amount: 1_000, status: 503 },
      { payment: 'p2', kind: 'charge', opKey: 'p2', amount: 1_000, status: 202 },
      { payment: 'p3', kind: 'charge', opKey: 'p3', amount: 1_000, status: 500 },
    ]);
    expect(stateOf(charges, 'p1')).toBe('refused');
    expect(stateOf(charges, 'p2')).toBe('taken');
    expect(stateOf(charges, 'p3')).toBe('unanswered');
    expect(stateOf(charges, 'p4')).toBe('unanswered');
  });

  it("chargeAnswers: each payment's charge answers in order, captures and refunds left out", () => {
    const answers: SoakAnswer[] = [
      ...cleanAnswers(),
      { payment: 'p1', kind: 'charge', opKey: 'p1', amount: 1_000, status: 503 },
    ];
    const byPayment = chargeAnswers(answers);
    expect([...byPayment.keys()]).toEqual(['p1', 'p2']);
    expect(byPayment.get('p1')?.map((a) => a.status)).toEqual([200, 503]);
    expect(byPayment.get('p2')?.map((a) => a.kind)).toEqual(['charge']);
  });
});
