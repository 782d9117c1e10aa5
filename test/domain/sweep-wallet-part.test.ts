/**
 * The sweep's comparison and the webhook adoption of a payment with a wallet part: the provider was charged for the
 * rest only (`amount.value - wallet.amount`), so that is what its payment must show, never the whole amount.
 */
import type { PaymentView } from '../../src/domain/payment';
import { chargeFactsOf } from '../../src/domain/adoption';
import { compareWithOurs } from '../../src/domain/sweep';
import { ourPayment, sweepCutoff } from '../helpers/sweeps';

const split = (over: Partial<PaymentView> = {}): PaymentView =>
  ourPayment({
    providerPaymentId: 'pay_1',
    amount: { value: 1_000, currency: 'EUR' },
    wallet: { walletId: 'w-1', amount: 400, status: 'captured', refunded: 0 },
    ...over,
  });

describe('a payment with a wallet part, as the sweep and the adoption see it', () => {
  it('agrees with the provider payment of its card part', () => {
    const listed = { id: 'pay_1', status: 'succeeded', amount: 600, currency: 'EUR' } as const;
    expect(compareWithOurs(split(), listed, sweepCutoff)).toEqual({ kind: 'agrees' });
  });

  it('disagrees with a provider payment of the whole amount (the wallet part was charged to the card too)', () => {
    const listed = { id: 'pay_1', status: 'succeeded', amount: 1_000, currency: 'EUR' } as const;
    expect(compareWithOurs(split(), listed, sweepCutoff)).toMatchObject({ kind: 'disagreement' });
  });

  it('matches webhooks without metadata by the card part’s amount', () => {
    expect(chargeFactsOf(split())).toMatchObject({ amount: 600, currency: 'EUR' });
  });
});
