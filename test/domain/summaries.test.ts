import {
  activitySummary,
  formatMoney,
  formatWait,
  paymentCurrentDetails,
  paymentStaticDetails,
  paymentSummary,
} from '../../src/domain/summaries';

const facts = {
  merchantId: 'm1',
  key: 'key-1',
  orderId: '1001',
  amount: { value: 1000, currency: 'EUR' },
  provider: 'simulator',
  capture: 'automatic' as const,
};

it('formats minor units by the currency exponent, in integers', () => {
  expect(formatMoney(1000, 'EUR')).toBe('EUR 10.00');
  expect(formatMoney(5, 'USD')).toBe('USD 0.05');
  expect(formatMoney(1000, 'JPY')).toBe('JPY 1000');
  expect(formatMoney(1234, 'KWD')).toBe('KWD 1.234');
  expect(formatMoney(9_007_199_254_740_991, 'EUR')).toBe('EUR 90071992547409.91');
});

it('summarizes a payment in one line, without the payment method', () => {
  expect(paymentSummary(facts)).toBe('EUR 10.00 for order 1001 (merchant m1, simulator)');
  expect(paymentStaticDetails({ ...facts, paymentMethod: 'pm_card_visa' } as typeof facts)).not.toContain('pm_');
});

it('keeps the current details to status, amounts, attempts and the review reason', () => {
  const details = paymentCurrentDetails({
    status: 'needs_review',
    amount: { value: 1000, currency: 'EUR' },
    amountAuthorized: 0,
    amountCaptured: 0,
    amountRefunded: 0,
    attempts: 2,
    review: { reason: 'create not found at simulator after 5 checks' },
  });
  expect(details).toContain('**needs_review** after 2 provider attempts');
  expect(details).toContain('needs review: create not found');
});

it('says in the current details that a payment waits for the customer, and nothing of the kind once it ended', () => {
  const waiting = {
    status: 'requires_action',
    amount: { value: 1000, currency: 'EUR' },
    amountAuthorized: 0,
    amountCaptured: 0,
    amountRefunded: 0,
    attempts: 1,
  };
  expect(paymentCurrentDetails(waiting)).toContain('waits for the customer to authenticate the payment');
  const expired = paymentCurrentDetails({ ...waiting, status: 'declined', declineCode: 'action_expired' });
  expect(expired).not.toContain('waits for the customer');
  expect(expired).toContain('declined: `action_expired`');
});

it('keeps every operator verdict in the current details: who, what, the review it answered, when, the note', () => {
  const details = paymentCurrentDetails({
    status: 'authorized',
    amount: { value: 1000, currency: 'EUR' },
    amountAuthorized: 1000,
    amountCaptured: 0,
    amountRefunded: 0,
    attempts: 1,
    verdicts: [
      {
        operator: 'operator:ops_1',
        outcome: 'failed',
        note: 'not in the dashboard',
        operation: 'capture',
        reviewReason: 'capture not found at simulator after 2 checks',
        at: '2030-01-01T00:00:00.000Z',
      },
    ],
  });
  expect(details).toContain(
    '- verdict on the capture: **failed** by `operator:ops_1` at 2030-01-01T00:00:00.000Z, answering "capture not ' +
      'found at simulator after 2 checks": not in the dashboard',
  );
});

it('names activities and waits as an operator reads them', () => {
  expect(activitySummary('create', 'simulator')).toBe('create payment at simulator');
  expect(formatWait(30_000)).toBe('30 s');
  expect(formatWait(120_000)).toBe('2 min');
  expect(formatWait(21_600_000)).toBe('6 h');
  expect(formatWait(30 * 86_400_000)).toBe('30 d');
});

it('tells a payment’s wallet part: its amount in the static details, its status and refunds in the current details', () => {
  const split = { ...facts, wallet: { amount: 400 } };
  expect(paymentStaticDetails(split)).toContain('- wallet part: EUR 4.00 held first, the provider charged EUR 6.00');
  const details = paymentCurrentDetails({
    status: 'succeeded',
    amount: { value: 1000, currency: 'EUR' },
    amountAuthorized: 600,
    amountCaptured: 600,
    amountRefunded: 0,
    attempts: 1,
    wallet: { amount: 400, status: 'captured', refunded: 100 },
  });
  expect(details).toContain('- wallet part EUR 4.00 **captured**, refunded to the wallet EUR 1.00');
});
