import { WorkflowUpdateFailedError } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { AmountExceeded, IdempotencyKeyReused, InvalidTransition, ValidationError } from '../../src/client';
import { parseOrThrow, translateUpdateFailure } from '../../src/client/failures';
import { reflects } from '../../src/client/provider-events';
import { ChargeRequest, type PaymentView } from '../../src/domain/payment';

const rejected = (type: string) =>
  new WorkflowUpdateFailedError('Workflow Update failed', ApplicationFailure.create({ type, message: `no: ${type}` }));

describe('translateUpdateFailure', () => {
  it.each([
    ['IdempotencyKeyReused', IdempotencyKeyReused],
    ['InvalidTransition', InvalidTransition],
    ['AmountExceeded', AmountExceeded],
    ['ValidationError', ValidationError],
  ])('turns a %s rejection into its typed error, keeping the cause', (type, cls) => {
    const err = rejected(type);
    const typed = translateUpdateFailure(err);

    expect(typed).toBeInstanceOf(cls);
    expect((typed as Error).cause).toBe(err);
  });

  it('leaves anything else as it was', () => {
    const other = rejected('Surprise');
    const plain = new Error('boom');

    expect(translateUpdateFailure(other)).toBe(other);
    expect(translateUpdateFailure(plain)).toBe(plain);
  });
});

describe('parseOrThrow', () => {
  it('names every invalid field by its dotted path', () => {
    expect.assertions(2);
    try {
      parseOrThrow(ChargeRequest, {
        orderId: '',
        amount: { value: 1.5, currency: 'EUR' },
        paymentMethod: 'pm_x',
        x: 1,
      });
    } catch (err) {
      expect(err).toBeInstanceOf(ValidationError);
      expect(new Set((err as ValidationError).fields.map((f) => f.path))).toEqual(
        new Set(['orderId', 'amount.value', 'x']),
      );
    }
  });
});

describe('reflects', () => {
  const view = {
    providerPaymentId: 'pay_1',
    status: 'succeeded',
    amountAuthorized: 100,
    amountCaptured: 100,
    amountRefunded: 40,
  } as PaymentView;
  const payment = {
    id: 'pay_1',
    status: 'succeeded' as const,
    amount: 100,
    amountCaptured: 100,
    amountRefunded: 40,
    currency: 'EUR',
    reference: 'o',
    created: 1,
  };

  it('recognises an event the final view already shows', () => {
    expect(reflects(view, payment)).toBe(true);
  });

  it('flags money movement the view does not show', () => {
    expect(reflects(view, { ...payment, amountRefunded: 60 })).toBe(false);
    expect(reflects(view, { ...payment, status: 'voided' })).toBe(false);
    expect(reflects(view, { ...payment, id: 'pay_2' })).toBe(false);
  });
});
