import type { FastifyReply } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { PaymentsClient } from '../../client';
import {
  ApiError,
  IdempotencyKeyHeaders,
  ListPaymentsQuery,
  PaymentKeyParams,
  PaymentList,
} from '../../domain/api-schemas';
import {
  CaptureRequest,
  ChargeRequest,
  MerchantId,
  type PaymentView,
  PaymentView as PaymentViewSchema,
  RefundRequest,
  ResolveRequest,
  isSettledStatus,
} from '../../domain/payment';

/** Options of {@link paymentRoutes}. */
export interface PaymentRoutesOptions {
  readonly client: PaymentsClient;
}

const tags = ['payments'];
const errors = { 400: ApiError, 401: ApiError, 403: ApiError, 404: ApiError, 503: ApiError };

/**
 * `POST /v1/payments/:key/resolve` query string: a payment key is scoped by merchant, and an operator acts for none,
 * so it names the payment's merchant.
 */
export const ResolveQuery = z.strictObject({
  merchantId: MerchantId.describe('The merchant whose payment this is (a payment key is unique per merchant only).'),
});
const viewResponses = { 200: PaymentViewSchema, 202: PaymentViewSchema, ...errors };

/** The path of a payment, for `Location`. */
export const paymentPath = (key: string): string => `/v1/payments/${encodeURIComponent(key)}`;

/** 200 once the provider answered; 202 + `Location` while pending, unknown or in review (or still running). */
function sendView(reply: FastifyReply, view: PaymentView, completed = true) {
  if (completed && isSettledStatus(view.status)) return reply.code(200).send(view);
  return reply.code(202).header('location', paymentPath(view.key)).send(view);
}

/**
 * `/v1/payments...`: every route acts for the merchant the bearer token maps to, except resolve, which is an operator
 * action (the operator names the merchant).
 */
export const paymentRoutes: FastifyPluginAsyncZod<PaymentRoutesOptions> = async (app, { client }) => {
  // An empty JSON body is no body (a capture without one captures everything authorized); scoped to these routes.
  const json = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) =>
    body.length === 0 ? done(null, undefined) : json(request, body.toString(), done),
  );

  app.post(
    '/v1/payments',
    {
      schema: {
        operationId: 'createPayment',
        summary: 'Charge (or authorize) a payment, once per Idempotency-Key',
        description:
          '200 when the provider answered; 202 with `Location` while pending or unknown, also when no worker took the ' +
          'payment within SUBMIT_WAIT_MS + 2 s (it was durably started and goes on); 503 with `Retry-After` when it ' +
          'could not be started (repeat with the same key). A repeat with the same key and body replays the first ' +
          'final answer (status and body as first answered, whatever happened to the payment since; while that was a ' +
          '202, the payment’s progress) with `Idempotent-Replayed: true`; another body under the same key is 422. ' +
          'A `provider` that is not configured is 400 naming `provider`. One open payment per order: while a payment ' +
          'for the same `orderId` is pending or unknown (or in review with its charge undecided), a new key is 409 ' +
          '`payment_in_flight` whose `paymentKey` names the open payment (off for merchants that split payments). ' +
          'A `wallet` part is held on the merchant’s wallet first (short funds: 200 `declined` ' +
          '`wallet_insufficient_funds`, nothing sent to the provider), the provider is charged for the rest; 400 ' +
          'naming `wallet.amount`, `wallet.walletId`, `amount.currency` or `wallet` (manual capture, no wallets here). ' +
          'Operator tokens: 403.',
        tags,
        headers: IdempotencyKeyHeaders,
        body: ChargeRequest,
        response: { ...viewResponses, 409: ApiError, 422: ApiError },
      },
    },
    async (request, reply) => {
      const { view, replayed, completed } = await client.charge(
        request.merchantId,
        request.headers['idempotency-key'],
        request.body,
      );
      if (replayed) reply.header('idempotent-replayed', 'true');
      return sendView(reply, view, completed ?? true);
    },
  );

  app.get(
    '/v1/payments/:key',
    {
      schema: {
        operationId: 'getPayment',
        summary: 'A payment by its idempotency key',
        tags,
        params: PaymentKeyParams,
        response: { 200: PaymentViewSchema, ...errors },
      },
    },
    async (request) => client.get(request.merchantId, request.params.key),
  );

  app.get(
    '/v1/payments',
    {
      schema: {
        operationId: 'listPayments',
        summary: 'The merchant’s payments from Temporal visibility (eventually consistent), newest first',
        tags,
        querystring: ListPaymentsQuery,
        response: { 200: PaymentList, ...errors },
      },
    },
    async (request) => client.list(request.merchantId, request.query),
  );

  app.post(
    '/v1/payments/:key/capture',
    {
      schema: {
        operationId: 'capturePayment',
        summary: 'Capture an authorized payment (all of it without an amount), once per Idempotency-Key',
        description:
          'The body is optional: none, `{}` or `{ "amount": <integer minor units> }` (no amount: everything ' +
          'authorized). A capture is final: what a partial capture leaves is released (`amountReleased`), and a ' +
          'second capture is 409 `invalid_transition`. ' +
          'What each answer means for the money: **200** the provider confirmed this capture (`operations[]` shows it ' +
          '`succeeded`); **202** + `Location` it is still moving (its first call is slow, or its outcome was unknown and ' +
          'a reconcile is checking the provider: poll the payment, `operations[]` says `running` or `needs_review`); ' +
          '**422 `provider_rejected`** the provider refused it, nothing moved (`providerCode` says why; a repeat of the ' +
          'key answers the same); **503 `provider_unavailable`** + `Retry-After` it never reached the provider (breaker ' +
          'open, a cool-down, a refused connection), nothing moved and nothing is held (`operations[]` shows it ' +
          '`failed`): repeat the same request after Retry-After, its key tries again; **409 `invalid_transition`** the ' +
          'payment is not authorized; **409 ' +
          '`operation_in_flight`** another capture or refund of this payment is being reconciled; **422 ' +
          '`amount_exceeded`** over what is still authorized; **422 `idempotency_key_reused`** the key was used for ' +
          'another payment or amount. A repeat with the same key and body never moves money twice: it replays the ' +
          'first final answer (status and body as first answered) with `Idempotent-Replayed: true`, or, while the ' +
          'operation is still moving, its progress (202, also marked).',
        tags,
        params: PaymentKeyParams,
        headers: IdempotencyKeyHeaders,
        // No body (or an empty one), `{}` and `{ amount }` in minor units: without an amount, everything authorized.
        body: CaptureRequest.nullish(),
        response: { ...viewResponses, 409: ApiError, 422: ApiError },
      },
    },
    async (request, reply) => {
      const { view, completed, replayed } = await client.capture(
        request.merchantId,
        request.params.key,
        request.headers['idempotency-key'],
        request.body ?? {},
      );
      if (replayed) reply.header('idempotent-replayed', 'true');
      return sendView(reply, view, completed);
    },
  );

  app.post(
    '/v1/payments/:key/refunds',
    {
      schema: {
        operationId: 'refundPayment',
        summary: 'Refund part or all of what was captured, once per Idempotency-Key',
        description:
          'What each answer means for the money: **200** the provider confirmed this refund (`operations[]` shows it ' +
          '`succeeded`); **202** + `Location` it is still moving (its first call is slow, or its outcome was unknown and ' +
          'a reconcile is checking the provider: poll the payment, `operations[]` says `running` or `needs_review`); ' +
          '**422 `provider_rejected`** the provider refused it, nothing moved (`providerCode` says why; a repeat of the ' +
          'key answers the same); **503 `provider_unavailable`** + `Retry-After` it never reached the provider, nothing ' +
          'moved and nothing is held (`operations[]` shows it `failed`): repeat the same request after Retry-After, its ' +
          'key tries again; **409 `invalid_transition`** the payment is not captured, or its refund window has closed; **409 ' +
          '`operation_in_flight`** another capture or refund of this payment is being reconciled; **422 ' +
          '`amount_exceeded`** over what was captured and not yet refunded; **422 `idempotency_key_reused`** the key was used for ' +
          'another payment or amount. A repeat with the same key and body never moves money twice: it replays the ' +
          'first final answer (status and body as first answered) with `Idempotent-Replayed: true`, or, while the ' +
          'operation is still moving, its progress (202, also marked).',
        tags,
        params: PaymentKeyParams,
        headers: IdempotencyKeyHeaders,
        body: RefundRequest,
        response: { ...viewResponses, 409: ApiError, 422: ApiError },
      },
    },
    async (request, reply) => {
      const { view, completed, replayed } = await client.refund(
        request.merchantId,
        request.params.key,
        request.headers['idempotency-key'],
        request.body,
      );
      if (replayed) reply.header('idempotent-replayed', 'true');
      return sendView(reply, view, completed);
    },
  );

  app.post(
    '/v1/payments/:key/resolve',
    {
      schema: {
        operationId: 'resolvePayment',
        summary: 'An operator’s verdict on a payment in needs_review (operator tokens only)',
        description:
          'Operator tokens only: a merchant token is 403 `forbidden`, a missing or unknown token 401. The operator ' +
          'names the payment by `merchantId` and key. Every verdict is checked against a look-up at the provider (by ' +
          'the `providerPaymentId` given, else the provider payment the payment knows, else the payment’s own key), and the ' +
          'payment takes the provider’s amounts and status, never the operator’s: **200** the verdict was applied and ' +
          'recorded in `verdicts[]` as `operator:<operatorId>` with its note; **422 `provider_disagrees`** the provider ' +
          'does not confirm it (`succeeded` for what it does not show, e.g. a create it never saw or a capture it does ' +
          'not show; `failed` for what it shows): `providerPayment` is what it found, the verdict was not recorded (for ' +
          'a `failed` the provider contradicts, the payment took the provider’s answer); **400** naming ' +
          '`providerPaymentId` when that id is not this payment’s at the provider; **409 `invalid_transition`** unless ' +
          'the payment is in `needs_review`; **503 `provider_unavailable`** with `Retry-After` the provider could not be ' +
          'asked (nothing recorded: send it again after the wait); **503 `unavailable`** the payment did not answer in time.',
        tags,
        params: PaymentKeyParams,
        querystring: ResolveQuery,
        body: ResolveRequest,
        response: { 200: PaymentViewSchema, ...errors, 409: ApiError, 422: ApiError },
      },
      config: { roles: ['operator'] },
    },
    async (request) =>
      client.resolve(request.query.merchantId, request.params.key, request.body, `operator:${request.operatorId}`),
  );
};
