/** The view of a payment that has just started (zod-free: workflow code imports it). */
import type { PaymentView } from './payment';

/**
 * What a started payment shows before any provider answer: nothing authorized, at the provider its request names, its
 * wallet part (if any) as held.
 */
export function startingView(
  input: {
    readonly merchantId: string;
    readonly key: string;
    readonly request: {
      readonly orderId: string;
      readonly amount: PaymentView['amount'];
      readonly provider: string;
      readonly wallet?: { readonly walletId: string; readonly amount: number } | undefined;
    };
  },
  status: 'pending' | 'unknown',
  atIso: string,
): PaymentView {
  return {
    key: input.key,
    merchantId: input.merchantId,
    orderId: input.request.orderId,
    status,
    amount: input.request.amount,
    amountAuthorized: 0,
    amountCaptured: 0,
    amountRefunded: 0,
    provider: input.request.provider,
    attempts: 0,
    // Its hold is the payment's first step: until it answers, the part may be held.
    ...(input.request.wallet === undefined
      ? {}
      : { wallet: { ...input.request.wallet, status: 'held' as const, refunded: 0 } }),
    createdAt: atIso,
    updatedAt: atIso,
  };
}
