/**
 * The checks of a charge's wallet part that need the ledger: the wallet exists and holds the charge's currency. Made
 * before anything starts, so a payment that could never take its wallet part is a 400, not a started workflow.
 */
import type { ChargeRequest } from '../domain/payment';
import type { WalletReader } from '../domain/wallets';
import { ValidationError } from './errors';

/** Refuses (400 naming the field) a wallet part this service cannot take; nothing to do for a card-only charge. */
export async function checkWalletPart(
  wallets: WalletReader | undefined,
  merchantId: string,
  request: ChargeRequest,
): Promise<void> {
  const part = request.wallet;
  if (part === undefined) return;
  if (wallets === undefined) {
    // No ledger (no DATABASE_URL): the workers would have no wallet activities and the payment would never move.
    throw new ValidationError([{ path: 'wallet', message: 'wallets are not enabled on this service' }]);
  }
  const wallet = await wallets.get(merchantId, part.walletId);
  if (wallet === undefined) {
    throw new ValidationError([{ path: 'wallet.walletId', message: 'no wallet of this merchant has that walletId' }]);
  }
  if (wallet.currency !== request.amount.currency) {
    throw new ValidationError([
      { path: 'amount.currency', message: `amount.currency must be the wallet’s currency (${wallet.currency})` },
    ]);
  }
}
