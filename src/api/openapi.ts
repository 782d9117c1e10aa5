/**
 * What the generated OpenAPI document cannot learn from the zod schemas: the response headers (`Request-Id` on every
 * answer, `Location` on a 202, `Idempotent-Replayed` on a keyed write's replayable answers, `Retry-After` on a 503) as header
 * objects, the error answers every route can give (500, 503; 413 and 415 where a body is read), and for each error
 * status the `error.type` values it carries (`x-error-types`, also named in the description).
 */
import type { ApiErrorType } from '../domain/api-schemas';

type ErrorTypes = Readonly<Record<string, readonly ApiErrorType[]>>;

/**
 * The `error.type` values each error status carries unless {@link errorTypesByOperation} says otherwise. Together with
 * those they are every {@link ApiErrorType}.
 */
export const errorTypesByStatus: ErrorTypes = {
  '400': ['validation_error'],
  '401': ['unauthorized'],
  '403': ['forbidden'],
  '404': ['not_found'],
  '409': ['invalid_transition', 'operation_in_flight', 'payment_in_flight'],
  '413': ['payload_too_large'],
  '415': ['unsupported_media_type'],
  '422': ['idempotency_key_reused', 'amount_exceeded', 'provider_rejected'],
  '500': ['internal_error'],
  '503': ['unavailable'],
};

/** Operations (by `operationId`) that answer a status with other types than its default: only what they can answer. */
export const errorTypesByOperation: Readonly<Record<string, ErrorTypes>> = {
  createPayment: { '409': ['payment_in_flight'], '422': ['idempotency_key_reused'] },
  capturePayment: {
    '409': ['invalid_transition', 'operation_in_flight'],
    '503': ['unavailable', 'provider_unavailable'],
  },
  refundPayment: {
    '409': ['invalid_transition', 'operation_in_flight'],
    '503': ['unavailable', 'provider_unavailable'],
  },
  resolvePayment: {
    '409': ['invalid_transition'],
    '422': ['provider_disagrees'],
    '503': ['unavailable', 'provider_unavailable'],
  },
  resolveReviewItem: { '409': ['invalid_transition'] },
  receiveProviderWebhook: { '400': ['validation_error', 'invalid_signature'] },
  creditWallet: { '422': ['idempotency_key_reused', 'currency_mismatch'] },
};

const headers = {
  RequestId: {
    description: 'This request’s id (a UUID): quote it when asking about a request; it is in the API’s log line.',
    schema: { type: 'string', format: 'uuid' },
  },
  Location: {
    description: 'Where to read the payment while it is still moving (`GET /v1/payments/{key}`).',
    schema: { type: 'string' },
  },
  IdempotentReplayed: {
    description:
      '`true` when this answer replays the first final answer (or, while still moving, the progress) of an earlier ' +
      'request with the same Idempotency-Key and body.',
    schema: { type: 'string', enum: ['true'] },
  },
  RetryAfter: {
    description: 'Seconds to wait before repeating the request (it is idempotent by its key).',
    schema: { type: 'string', pattern: '^[0-9]+$' },
  },
} as const;

type Json = Record<string, unknown>;
interface Operation extends Json {
  parameters?: { in?: string; name?: string }[];
  requestBody?: unknown;
  responses?: Record<string, Json>;
}

const ref = (name: keyof typeof headers) => ({ $ref: `#/components/headers/${name}` });

/** Adds the header objects, the always-possible error answers and the error types to a generated document. */
export function describeHeadersAndErrors<T extends Json>(doc: T): T {
  const d = doc as Json & { paths?: Record<string, Record<string, Operation>>; components?: Json };
  d.components = { ...d.components, headers: { ...(d.components?.headers as Json | undefined), ...headers } };
  const errorSchema = { $ref: '#/components/schemas/Error' };
  for (const operations of Object.values(d.paths ?? {})) {
    for (const [method, op] of Object.entries(operations)) {
      if (!['get', 'post', 'put', 'patch', 'delete'].includes(method)) continue;
      const responses = (op.responses ??= {});
      const jsonError = (status: string, description: string) => {
        responses[status] ??= { description, content: { 'application/json': { schema: errorSchema } } };
      };
      jsonError('500', 'Internal error (logged with the Request-Id)');
      jsonError('503', 'Temporal is unavailable or the API is shutting down: repeat after Retry-After');
      if (op.requestBody !== undefined) {
        jsonError('413', 'The body is larger than the limit');
        jsonError('415', 'The body is not JSON');
      }
      const keyed = (op.parameters ?? []).some((p) => p.in === 'header' && p.name?.toLowerCase() === 'idempotency-key');
      for (const [status, response] of Object.entries(responses)) {
        const types = errorTypesByOperation[String(op.operationId)]?.[status] ?? errorTypesByStatus[status];
        const h: Json = { 'Request-Id': ref('RequestId') };
        if (status === '202') h.Location = ref('Location');
        // A repeat replays the first final answer: a 200, a 202 while still moving, or the provider's refusal.
        const replayable = status === '200' || status === '202' || types?.includes('provider_rejected') === true;
        if (keyed && replayable) h['Idempotent-Replayed'] = ref('IdempotentReplayed');
        if (status === '503') h['Retry-After'] = ref('RetryAfter');
        response.headers = { ...(response.headers as Json | undefined), ...h };
        if (types) {
          response['x-error-types'] = types;
          const base = typeof response.description === 'string' ? response.description : '';
          const named = `error.type: ${types.map((t) => `\`${t}\``).join(', ')}`;
          if (!base.includes(named)) response.description = base ? `${base}. ${named}` : named;
        }
      }
    }
  }
  return doc;
}
