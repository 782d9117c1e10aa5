/** How the client answers an operator's verdict the payment refused: the typed error for each refusal type. */
import { ServiceError } from '@temporalio/client';
import type { RequestRefusal } from '../domain/definitions';
import { ErrorType } from '../domain/errors';
import { ProviderDisagrees, type ProviderPaymentShown } from './errors';
import { translateRefusal } from './failures';

/**
 * A refused verdict as a typed error: {@link ProviderDisagrees} with what the provider showed; a provider that could not
 * be asked as a `ServiceError` (nothing recorded: the operator sends the verdict again); the payment's other rules as
 * for captures and refunds.
 */
export function verdictRefusal(refusal: RequestRefusal): Error {
  if (refusal.type === ErrorType.ProviderDisagrees) {
    const shown = (refusal.details?.[0] as { providerPayment?: ProviderPaymentShown } | undefined)?.providerPayment;
    return new ProviderDisagrees(refusal.message, shown, { cause: refusal });
  }
  if (refusal.type === ErrorType.ProviderUnavailable) return new ServiceError(refusal.message);
  return translateRefusal(refusal) ?? new Error(refusal.message);
}
