/**
 * Wallets (CONTRACTS §1b as docs/http-api.md#wallets tells it): an internal balance per merchant and `walletId`, in one
 * currency fixed by its first credit, kept in PostgreSQL. Schemas of the API's requests and answers; the ledger
 * (src/wallets) answers in these shapes.
 */
import { z } from 'zod';
import { type Currency, Money } from './money';
import { walletEntryKinds } from './wallet-operations';

/** The merchant's own name of a wallet: 1-64 characters of `A-Za-z0-9._:-`. */
export const WalletId = z.string().regex(/^[A-Za-z0-9._:-]{1,64}$/, {
  message: 'walletId must be 1-64 characters of A-Z, a-z, 0-9, ., _, : or -',
});
export type WalletId = z.infer<typeof WalletId>;

/** `/v1/wallets/:walletId`. */
export const WalletParams = z.object({ walletId: WalletId.describe('The merchant’s own id of the wallet.') });

/** `POST /v1/wallets/:walletId/credits` body. */
export const CreditRequest = z.strictObject({
  amount: Money.describe('What to add, in minor units; the first credit fixes the wallet’s currency.'),
  reason: z.string().min(1).max(200).optional().describe('Why (shown in the entry; never card or customer data).'),
});
export type CreditRequest = z.output<typeof CreditRequest>;

const Amount = z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER);
const Iso = z.iso.datetime({ offset: true });

/** A wallet as the API shows it: `available` = `balance - held`, never below 0. */
export const WalletView = z.object({
  walletId: WalletId,
  merchantId: z.string(),
  // The output is a plain string (the input schema's transform cannot serialize); it was an ISO 4217 code when stored.
  currency: z.string().describe('ISO 4217, fixed by the first credit.'),
  balance: Amount.describe('Credits and refunds minus captures: always the sum of the entries of those kinds.'),
  held: Amount.describe('Holds neither captured nor released yet.'),
  available: Amount.describe('`balance - held`: what a new hold may take.'),
  updatedAt: Iso,
});
export type WalletView = z.infer<typeof WalletView>;

/** Reads a merchant's wallet (the ledger is one): the API checks a payment's wallet part with it before any start. */
export interface WalletReader {
  get(merchantId: string, walletId: string): Promise<WalletView | undefined>;
}

/**
 * The ledger's one decision on a wallet-only payment's debit (`hold:`/`capture:` under the payment key): captured, or
 * declined for short funds; `at` is when the ledger decided it. Recorded either way, so every caller that debits the
 * same payment key reads the same decision back (src/wallets/ledger.ts).
 */
export interface WalletDebitDecision {
  readonly status: 'captured' | 'insufficient_funds';
  readonly at: string;
}

/** A ledger the API debits a wallet-only payment on (after its workflow started), answering from the decision. */
export interface WalletDebiter {
  debit(args: {
    readonly merchantId: string;
    readonly walletId: string;
    readonly paymentKey: string;
    readonly amount: number;
    readonly currency: Currency;
  }): Promise<WalletDebitDecision>;
}

/** One append-only entry of a wallet. */
export const WalletEntry = z.object({
  operationId: z.string(),
  kind: z.enum(walletEntryKinds),
  amount: Amount,
  paymentKey: z.string().optional().describe('The payment a hold, capture, release or refund belongs to.'),
  reason: z.string().optional(),
  at: Iso,
});
export type WalletEntry = z.infer<typeof WalletEntry>;

/** An opaque page token of the entries list. */
export const EntryPageToken = z
  .string()
  .max(64, { message: 'pageToken is too long' })
  .regex(/^[A-Za-z0-9_-]+$/, { message: 'pageToken must be a token from an earlier page' });

/** `GET /v1/wallets/:walletId/entries` query string. */
export const WalletEntriesQuery = z.strictObject({
  pageToken: EntryPageToken.optional(),
  pageSize: z.coerce.number().int().min(1).max(100).optional(),
});
export type WalletEntriesQuery = z.infer<typeof WalletEntriesQuery>;

/** `GET /v1/wallets/:walletId/entries` answer: oldest first. */
export const WalletEntryList = z.object({
  entries: z.array(WalletEntry),
  nextPageToken: EntryPageToken.optional(),
});
export type WalletEntryList = z.infer<typeof WalletEntryList>;
