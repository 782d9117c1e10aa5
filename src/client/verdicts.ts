/**
 * An operator's verdict on a payment under review: a request to the payment (request-protocol.ts), checked by the
 * payment against a look-up at the provider, answered with the view after it or a typed refusal.
 */
import { ServiceError } from '@temporalio/client';
import { type RequestRefusal, resolveRequest } from '../domain/definitions';
import { ErrorType } from '../domain/errors';
import { type PaymentView, ResolveRequest } from '../domain/payment';
import { type ClientContext, paymentScope } from './context';
import { ProviderDisagrees, type ProviderPaymentShown } from './errors';
import { parseOrThrow, translateRefusal } from './failures';
import { sendRequest } from './request-protocol';

/**
 * An operator's verdict on a payment in `needs_review`: `InvalidTransition` in any other status,
 * {@link ProviderDisagrees} when the provider does not confirm it. Sent and durable but not applied within
 * `rpcTimeoutMs` (no worker, or its provider look-up is slow): a `ServiceError`, the operator asks again.
 */
export async function resolve(
  ctx: ClientContext,
  merchantId: string,
  key: string,
  body: unknown,
  operator?: string,
): Promise<PaymentView> {
  const { workflowId } = paymentScope(merchantId, key);
  const request = parseOrThrow(ResolveRequest, body);
  const { answer } = await sendRequest(ctx, workflowId, {
    request: resolveRequest,
    args: { ...request, ...(operator === undefined ? {} : { operator }), requestedAt: new Date().toISOString() },
    checkArgs: [],
    verdict: (refusal) => ({ refusal }),
    answerArgs: (requestId) => [requestId],
    done: (handled) => handled !== null,
    waitMs: ctx.rpcTimeoutMs,
    refused: verdictRefusal,
  });
  if (answer) return answer.view;
  throw new ServiceError('The verdict was recorded but not applied in time');
}

/**
 * A refused verdict as a typed error: {@link ProviderDisagrees} with what the provider showed; a provider that could not
 * be asked as {@link ProviderUnavailable} with the wait (nothing recorded: the operator sends the verdict again after
 * it), as for captures and refunds; the payment's other rules as for captures and refunds.
 */
export function verdictRefusal(refusal: RequestRefusal): Error {
  if (refusal.type === ErrorType.ProviderDisagrees) {
    const shown = (refusal.details?.[0] as { providerPayment?: ProviderPaymentShown } | undefined)?.providerPayment;
    return new ProviderDisagrees(refusal.message, shown, { cause: refusal });
  }
  return translateRefusal(refusal) ?? new Error(refusal.message);
}
