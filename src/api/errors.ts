/** Error answers: one shape (`{ error: { type, message?, fields? } }`), never a stack trace or an internal message. */
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { hasZodFastifySchemaValidationErrors } from 'fastify-type-provider-zod';
import {
  isAmountExceeded,
  isIdempotencyKeyReused,
  isInvalidTransition,
  isOperationInFlight,
  isPaymentInFlight,
  isPaymentNotFound,
  isProviderDisagrees,
  isProviderRejected,
  isProviderUnavailable,
  isReviewItemNotFound,
  isTemporalUnavailable,
  isValidationError,
} from '../client';
import type { ApiError, ApiErrorType, FieldError } from '../domain/api-schemas';
import { WalletFailure } from '../domain/wallet-errors';
import { isDatabaseError, isWalletError } from '../wallets';

/** An error answer body; `extra` carries a type's own fields (`paymentKey` with `payment_in_flight`). */
export const errorBody = (
  type: ApiErrorType,
  message?: string,
  fields?: readonly FieldError[],
  extra: Pick<ApiError['error'], 'paymentKey' | 'providerCode' | 'providerPayment'> = {},
): ApiError => ({
  error: {
    type,
    ...(message === undefined ? {} : { message }),
    ...(fields === undefined ? {} : { fields: [...fields] }),
    ...extra,
  },
});

const headerNames: Record<string, string> = { 'idempotency-key': 'Idempotency-Key' };

/** A schema-validation issue as a field error: body paths dotted, headers by their canonical name. */
function fieldOf(context: string | undefined, instancePath: string, message: string, keys?: unknown): FieldError[] {
  const segments = instancePath.split('/').filter(Boolean);
  if (Array.isArray(keys) && keys.length > 0) {
    // An unknown member: name it, so the caller sees which field to remove.
    return keys.map((k) => ({ path: [...segments, String(k)].join('.'), message }));
  }
  if (context === 'headers') {
    const name = segments[0] ?? '';
    return [{ path: headerNames[name] ?? name, message }];
  }
  return [{ path: segments.length === 0 ? `(${context ?? 'body'})` : segments.join('.'), message }];
}

/** Maps every error to its answer; unexpected ones are logged with the request id and answered 500 without detail. */
export function handleError(error: FastifyError, request: FastifyRequest, reply: FastifyReply): FastifyReply {
  if (hasZodFastifySchemaValidationErrors(error)) {
    const fields = error.validation.flatMap((v) =>
      fieldOf(error.validationContext, v.instancePath, v.message ?? 'invalid', (v.params as { keys?: unknown }).keys),
    );
    return reply.code(400).send(errorBody('validation_error', 'The request is invalid', fields));
  }
  if (isValidationError(error))
    return reply.code(400).send(errorBody('validation_error', 'The request is invalid', error.fields));
  if (isIdempotencyKeyReused(error)) return reply.code(422).send(errorBody('idempotency_key_reused', error.message));
  if (isAmountExceeded(error)) return reply.code(422).send(errorBody('amount_exceeded', error.message));
  if (isProviderRejected(error)) {
    if (error.replayed) reply.header('idempotent-replayed', 'true');
    const body = errorBody('provider_rejected', error.message);
    if (error.providerCode !== undefined) body.error.providerCode = error.providerCode;
    return reply.code(422).send(body);
  }
  if (isProviderDisagrees(error)) {
    const shown = error.providerPayment === undefined ? {} : { providerPayment: { ...error.providerPayment } };
    return reply.code(422).send(errorBody('provider_disagrees', error.message, undefined, shown));
  }
  if (isOperationInFlight(error)) return reply.code(409).send(errorBody('operation_in_flight', error.message));
  if (isProviderUnavailable(error)) {
    // Whole seconds, at least 1: the caller repeats the same request (its key tries again) after the wait.
    const seconds = Math.max(1, Math.ceil(error.retryAfterMs / 1000));
    return reply
      .code(503)
      .header('retry-after', String(seconds))
      .send(errorBody('provider_unavailable', error.message));
  }
  if (isWalletError(error)) {
    if (error.type === WalletFailure.OperationConflict) {
      return reply.code(422).send(errorBody('idempotency_key_reused', error.message));
    }
    if (error.type === WalletFailure.CurrencyMismatch) {
      return reply.code(422).send(errorBody('currency_mismatch', error.message));
    }
    if (error.type === WalletFailure.WalletNotFound)
      return reply.code(404).send(errorBody('not_found', 'No such wallet'));
  }
  if (isDatabaseError(error)) {
    // Nothing applied, or unknown (a COMMIT's answer lost): either way the same request with the same key settles it.
    request.log.warn({ reason: error.reason }, 'database unavailable');
    return reply.code(503).header('retry-after', '1').send(errorBody('unavailable', 'Temporarily unavailable'));
  }
  if (isPaymentNotFound(error)) return reply.code(404).send(errorBody('not_found', 'No such payment'));
  if (isReviewItemNotFound(error)) return reply.code(404).send(errorBody('not_found', 'No such review item'));
  if (isInvalidTransition(error)) return reply.code(409).send(errorBody('invalid_transition', error.message));
  if (isPaymentInFlight(error)) {
    return reply
      .code(409)
      .send(errorBody('payment_in_flight', error.message, undefined, { paymentKey: error.paymentKey }));
  }
  switch (error.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return reply.code(413).send(errorBody('payload_too_large', 'The body is too large'));
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return reply.code(415).send(errorBody('unsupported_media_type', 'Send application/json'));
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return reply
        .code(400)
        .send(
          errorBody('validation_error', 'The body is not valid JSON', [{ path: '(body)', message: 'invalid JSON' }]),
        );
  }
  const status = typeof error.statusCode === 'number' ? error.statusCode : 500;
  if (status >= 400 && status < 500) {
    return reply.code(status).send(errorBody('validation_error', 'The request is invalid'));
  }
  request.log.error({ err: error }, 'request failed');
  if (isTemporalUnavailable(error)) {
    // The caller may repeat: every write is idempotent by its key.
    return reply.code(503).header('retry-after', '1').send(errorBody('unavailable', 'Temporarily unavailable'));
  }
  return reply.code(500).send(errorBody('internal_error', 'Internal error'));
}

/** The router's own errors (a malformed or over-long path): our 400, without the path it would echo. */
export function answerInvalidPath(_error: FastifyError, _request: FastifyRequest, reply: FastifyReply): void {
  void reply
    .code(400)
    .send(errorBody('validation_error', 'The request is invalid', [{ path: '(path)', message: 'invalid path' }]));
}
