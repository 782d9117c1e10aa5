/**
 * The sweep's comparison after a failover: a provider payment is compared with ours only at the provider holding our
 * payment. A failover moves a payment only when the provider it left never saw it, so a payment listed there naming
 * ours is a second charge, whatever our payment's state (the end-to-end case is in test/scenarios/failover-stripe.test.ts).
 */
import type { PaymentView } from '../../src/domain/payment';
import { compareWithOurs } from '../../src/domain/sweep';
import { ourPayment, sweepCutoff } from '../helpers/sweeps';

const ours = (over: Partial<PaymentView> = {}): PaymentView =>
  ourPayment({
    provider: 'stripe',
    providerPaymentId: 'pi_1',
    failovers: [{ from: 'simulator', to: 'stripe', reason: 'breaker_open', at: '2030-01-01T00:00:00.000Z' }],
    ...over,
  });
const listed = { id: 'pi_1', status: 'succeeded', amount: 1_000, currency: 'EUR' } as const;
const cutoff = sweepCutoff;

describe('compareWithOurs after a failover', () => {
  it('agrees with the payment listed at the provider holding ours', () => {
    expect(compareWithOurs(ours(), listed, cutoff, 'stripe')).toEqual({ kind: 'agrees' });
  });

  it.each([
    ['succeeded there, recorded', {}],
    ['still unknown there (the reconcile is young)', { status: 'unknown', providerPaymentId: undefined }],
    ['under review there', { status: 'needs_review', providerPaymentId: undefined }],
    ['failed everywhere', { status: 'failed', providerPaymentId: undefined }],
  ] as const)(
    'a payment at the first provider naming ours (%s) is a second charge, even with the same id',
    (_name, over) => {
      expect(compareWithOurs(ours(over), listed, cutoff, 'simulator')).toEqual({
        kind: 'orphan',
        reason: 'second_charge',
        detail: 'our payment is held at stripe, not at simulator',
      });
    },
  );
});
