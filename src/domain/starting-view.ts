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

/**
 * A wallet-only payment's first answer once the ledger decided its debit: `succeeded` with the part captured, or
 * `declined` (`wallet_insufficient_funds`) with nothing taken; updated when the ledger decided. The API answers it
 * from its own debit (src/client/wallet-only.ts) and the workflow reaches the same view from the same decision
 * (src/workflows/wallet-part.ts); a test holds the two equal.
 */
export function walletOnlyAnswer(
  input: Parameters<typeof startingView>[0],
  decision: { readonly status: 'captured' | 'insufficient_funds'; readonly at: string },
  createdAt: string,
): PaymentView {
  const view = startingView(input, 'pending', createdAt);
  const captured = decision.status === 'captured';
  return {
    ...view,
    status: captured ? 'succeeded' : 'declined',
    ...(captured ? {} : { declineCode: 'wallet_insufficient_funds' }),
    ...(view.wallet === undefined ? {} : { wallet: { ...view.wallet, status: captured ? 'captured' : 'released' } }),
    updatedAt: decision.at,
  };
}
