/**
 * `/v1/wallets/...` (docs/http-api.md#wallets): credits under an Idempotency-Key, a wallet, its entries. Every route acts
 * for the merchant of the bearer token: another merchant's wallet of the same id is not theirs (404). Served over the
 * ledger (PostgreSQL); an API without a database (no DATABASE_URL) answers 404 on each.
 */
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { ApiError, IdempotencyKeyHeaders } from '../../domain/api-schemas';
import { CreditRequest, WalletEntriesQuery, WalletEntryList, WalletParams, WalletView } from '../../domain/wallets';
import type { WalletLedger } from '../../wallets';
import { errorBody } from '../errors';

/** Options of {@link walletRoutes}. */
export interface WalletRoutesOptions {
  /** The ledger; absent: wallets are not enabled on this API. */
  readonly wallets: WalletLedger | undefined;
}

const tags = ['wallets'];
const errors = { 400: ApiError, 401: ApiError, 403: ApiError, 404: ApiError, 503: ApiError };
const notEnabled = errorBody('not_found', 'Wallets are not enabled on this API (it has no DATABASE_URL)');
const noWallet = errorBody('not_found', 'No such wallet');

export const walletRoutes: FastifyPluginAsyncZod<WalletRoutesOptions> = async (app, { wallets }) => {
  app.post(
    '/v1/wallets/:walletId/credits',
    {
      schema: {
        operationId: 'creditWallet',
        summary: 'Add to a wallet, once per Idempotency-Key (the first credit creates it, in its currency)',
        description:
          '200 with the wallet as this credit left it. A repeat with the same key and body answers the same with ' +
          '`Idempotent-Replayed: true` (also long after); the same key with another body or wallet is 422 ' +
          '`idempotency_key_reused`; another currency than the wallet’s is 422 `currency_mismatch`. Nothing is ' +
          'applied on a 4xx. A 503 may hide an applied credit whose answer was lost: repeat the same request, its key ' +
          'answers what happened.',
        tags,
        params: WalletParams,
        headers: IdempotencyKeyHeaders,
        body: CreditRequest,
        response: { 200: WalletView, ...errors, 422: ApiError },
      },
    },
    async (request, reply) => {
      if (wallets === undefined) return reply.code(404).send(notEnabled);
      const { wallet, replayed } = await wallets.credit(
        request.merchantId,
        request.params.walletId,
        request.headers['idempotency-key'],
        request.body,
      );
      if (replayed) reply.header('idempotent-replayed', 'true');
      return wallet;
    },
  );

  app.get(
    '/v1/wallets/:walletId',
    {
      schema: {
        operationId: 'getWallet',
        summary: 'A wallet: balance, held, available',
        tags,
        params: WalletParams,
        response: { 200: WalletView, ...errors },
      },
    },
    async (request, reply) => {
      if (wallets === undefined) return reply.code(404).send(notEnabled);
      const wallet = await wallets.get(request.merchantId, request.params.walletId);
      return wallet ?? reply.code(404).send(noWallet);
    },
  );

  app.get(
    '/v1/wallets/:walletId/entries',
    {
      schema: {
        operationId: 'listWalletEntries',
        summary: 'A wallet’s entries (credits, holds, captures, releases, refunds), oldest first, page by page',
        tags,
        params: WalletParams,
        querystring: WalletEntriesQuery,
        response: { 200: WalletEntryList, ...errors },
      },
    },
    async (request, reply) => {
      if (wallets === undefined) return reply.code(404).send(notEnabled);
      const page = await wallets.entries(request.merchantId, request.params.walletId, request.query);
      return page ?? reply.code(404).send(noWallet);
    },
  );
};
