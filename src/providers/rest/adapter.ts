import type { z } from 'zod';
import { OutcomeUnknownError, isProviderErrorOfType } from '../errors';
import { ErrorType } from '../../domain/errors';
import { defaultReferenceLookupPages } from '../../domain/retry';
import { HttpClient, headerValue, type HttpClientOptions, type HttpRequest } from '../http';
import type { Logger } from '../logging';
import { CreatedPaymentSchema, ProviderPaymentListSchema, ProviderPaymentSchema, ProviderRefundSchema } from './wire';
import type {
  CallContext,
  CreatePaymentInput,
  CreatePaymentResult,
  ListPaymentsQuery,
  LookupContext,
  PaymentProvider,
  ProviderCapabilities,
  ProviderPayment,
  ProviderRefund,
} from '../types';

/** Operation names carried by failures and logs; they match the simulator's ledger operations. */
export type RestOperation = 'create' | 'capture' | 'void' | 'refund' | 'lookup';

export interface RestProviderConfig {
  readonly name: string;
  /** e.g. `http://127.0.0.1:4010`. */
  readonly baseUrl: string;
  /** The merchant's api key, sent as a Bearer token; never logged. */
  readonly apiKey: string;
  readonly capabilities: ProviderCapabilities;
  readonly connectTimeoutMs: number;
  readonly totalTimeoutMs: number;
  readonly logger?: Logger;
  /** Transport tuning (connections, headers/body idle timeouts, connector options, clock). */
  readonly http?: Pick<HttpClientOptions, 'connections' | 'headersTimeoutMs' | 'bodyTimeoutMs' | 'connect' | 'clock'>;
  /** Pages a look-up by reference reads at most (default {@link defaultReferenceLookupPages}). */
  readonly referencePages?: number;
  /** The longest Retry-After taken from an answer (`PROVIDER_MAX_RETRY_AFTER_MS`; default the HTTP client's). */
  readonly maxRetryAfterMs?: number;
}

/** Capabilities of the simulator with a merchant that honours idempotency keys (its default). */
export const simulatorCapabilities = (keyTtlSeconds = 86_400): ProviderCapabilities => ({
  idempotencyKeys: true,
  keyTtlSeconds,
  lookupByKey: true,
  lookupByReference: true,
});

/**
 * Capabilities of the simulator with a merchant configured `idempotency: false`: a resend is a new effect, so a
 * workflow must look the payment up (by reference: a provider without keys cannot be asked by key) before resending.
 */
export const simulatorCapabilitiesWithoutKeys = (): ProviderCapabilities => ({
  idempotencyKeys: false,
  keyTtlSeconds: null,
  lookupByKey: false,
  lookupByReference: true,
});

const PAGE_LIMIT = 100;

const ctxFields = (
  ctx: CallContext | LookupContext | undefined,
): Pick<HttpRequest, 'requestId' | 'attempt' | 'signal'> => ({
  ...(ctx?.requestId === undefined ? {} : { requestId: ctx.requestId }),
  ...(ctx?.attempt === undefined ? {} : { attempt: ctx.attempt }),
  ...(ctx?.signal === undefined ? {} : { signal: ctx.signal }),
});

const postFields = (ctx: CallContext): Pick<HttpRequest, 'idempotencyKey' | 'requestId' | 'attempt' | 'signal'> => ({
  idempotencyKey: ctx.idempotencyKey,
  ...ctxFields(ctx),
});

/**
 * The generic REST adapter, for the provider API src/simulator serves; a Stripe adapter can sit beside it.
 * Every answer is validated with zod and mapped to camelCase; every failure is a {@link ProviderError} of one class.
 */
export class RestProvider implements PaymentProvider {
  readonly name: string;
  readonly capabilities: ProviderCapabilities;
  readonly #http: HttpClient;
  readonly #referencePages: number;

  constructor(config: RestProviderConfig) {
    this.name = config.name;
    this.#referencePages = config.referencePages ?? defaultReferenceLookupPages;
    // What one activity attempt may take is bounded by this client: say so, so the workflows size their timeouts.
    this.capabilities = {
      ...config.capabilities,
      callLimits: { callTimeoutMs: config.totalTimeoutMs, referencePages: this.#referencePages },
    };
    this.#http = new HttpClient({
      ...config.http,
      baseUrl: config.baseUrl,
      connectTimeoutMs: config.connectTimeoutMs,
      totalTimeoutMs: config.totalTimeoutMs,
      defaultHeaders: { authorization: `Bearer ${config.apiKey}` },
      name: config.name,
      ...(config.logger === undefined ? {} : { logger: config.logger }),
      ...(config.maxRetryAfterMs === undefined ? {} : { maxRetryAfterMs: config.maxRetryAfterMs }),
    });
  }

  /** Creates (authorizes, or authorizes and captures) a payment; a decline is a value. */
  async createPayment(input: CreatePaymentInput, ctx: CallContext): Promise<CreatePaymentResult> {
    const result = await this.#http.call(
      {
        method: 'POST',
        path: '/v1/payments',
        operation: 'create',
        json: {
          amount: input.amount,
          currency: input.currency,
          reference: input.reference,
          payment_method: input.paymentMethod,
          capture: input.capture,
          ...(input.metadata ? { metadata: input.metadata } : {}),
        },
        ...postFields(ctx),
      },
      CreatedPaymentSchema,
      { declines: true },
    );
    if (result.kind === 'declined') return { outcome: 'declined', declineCode: result.code };
    return {
      outcome: result.value.status,
      payment: result.value,
      replayed: headerValue(result.response.headers, 'idempotent-replayed') === 'true',
    };
  }

  /** Captures an authorized payment, in full when `amount` is absent. */
  async capturePayment(paymentId: string, body: { amount?: number }, ctx: CallContext): Promise<ProviderPayment> {
    return this.#ok(
      {
        method: 'POST',
        path: `/v1/payments/${encodeURIComponent(paymentId)}/capture`,
        route: '/v1/payments/:id/capture',
        operation: 'capture',
        json: body.amount === undefined ? {} : { amount: body.amount },
        ...postFields(ctx),
      },
      ProviderPaymentSchema,
    );
  }

  /** Voids (releases) an authorized payment. */
  async voidPayment(paymentId: string, ctx: CallContext): Promise<ProviderPayment> {
    return this.#ok(
      {
        method: 'POST',
        path: `/v1/payments/${encodeURIComponent(paymentId)}/void`,
        route: '/v1/payments/:id/void',
        operation: 'void',
        json: {},
        ...postFields(ctx),
      },
      ProviderPaymentSchema,
    );
  }

  /** Refunds part or all of the captured amount. */
  async refundPayment(paymentId: string, body: { amount: number }, ctx: CallContext): Promise<ProviderRefund> {
    return this.#ok(
      {
        method: 'POST',
        path: `/v1/payments/${encodeURIComponent(paymentId)}/refunds`,
        route: '/v1/payments/:id/refunds',
        operation: 'refund',
        json: { amount: body.amount },
        ...postFields(ctx),
      },
      ProviderRefundSchema,
    );
  }

  /** The payment, or null when the provider answers 404. */
  async getPayment(paymentId: string, ctx?: LookupContext): Promise<ProviderPayment | null> {
    const req: HttpRequest = {
      method: 'GET',
      path: `/v1/payments/${encodeURIComponent(paymentId)}`,
      route: '/v1/payments/:id',
      operation: 'lookup',
      ...ctxFields(ctx),
    };
    try {
      return await this.#ok(req, ProviderPaymentSchema);
    } catch (err) {
      if (isNotFound(err)) return null;
      throw err;
    }
  }

  /** The payment created with this idempotency key, or null. */
  async findByIdempotencyKey(idempotencyKey: string, ctx?: LookupContext): Promise<ProviderPayment | null> {
    const page = await this.#list({ idempotency_key: idempotencyKey, limit: '1' }, ctx, idempotencyKey);
    return page.data[0] ?? null;
  }

  /**
   * Every payment with this reference (our order id), across at most `referencePages` pages. More than that is an
   * answer we cannot complete: OutcomeUnknown (`lookup_truncated`), never a partial list a caller could take for all.
   */
  async findByReference(reference: string, ctx?: LookupContext): Promise<ProviderPayment[]> {
    const found: ProviderPayment[] = [];
    let startingAfter: string | undefined;
    for (let page = 0; page < this.#referencePages; page++) {
      const query: Record<string, string> = { reference, limit: String(PAGE_LIMIT) };
      if (startingAfter !== undefined) query.starting_after = startingAfter;
      const result = await this.#list(query, ctx);
      found.push(...result.data);
      const last = result.data.at(-1);
      if (!result.hasMore || last === undefined) return found;
      startingAfter = last.id;
    }
    throw new OutcomeUnknownError({ operation: 'lookup', reason: 'lookup_truncated' });
  }

  /** One page of payments by creation time (provider clock, unix seconds). */
  async listPayments(
    query: ListPaymentsQuery,
    ctx?: LookupContext,
  ): Promise<{ data: ProviderPayment[]; hasMore: boolean }> {
    const params: Record<string, string> = {};
    if (query.createdGte !== undefined) params.created_gte = String(query.createdGte);
    if (query.createdLt !== undefined) params.created_lt = String(query.createdLt);
    if (query.startingAfter !== undefined) params.starting_after = query.startingAfter;
    if (query.limit !== undefined) params.limit = String(query.limit);
    return this.#list(params, ctx);
  }

  /** Closes the connection pool; in-flight calls fail. */
  async close(): Promise<void> {
    await this.#http.close();
  }

  async #list(
    params: Record<string, string>,
    ctx: LookupContext | undefined,
    lookupKey?: string,
  ): Promise<{ data: ProviderPayment[]; hasMore: boolean }> {
    const result = await this.#ok(
      {
        method: 'GET',
        path: `/v1/payments?${new URLSearchParams(params).toString()}`,
        route: '/v1/payments',
        operation: 'lookup',
        // A lookup by key sends no Idempotency-Key header (the key travels in the query), but its hash is logged.
        ...(lookupKey === undefined ? {} : { logKey: lookupKey }),
        ...ctxFields(ctx),
      },
      ProviderPaymentListSchema,
    );
    return { data: [...result.data], hasMore: result.hasMore };
  }

  async #ok<T>(req: HttpRequest, schema: z.ZodType<T>): Promise<T> {
    const result = await this.#http.call(req, schema);
    // Unreachable: only `declines: true` (create) can produce a decline.
    if (result.kind !== 'ok') throw new Error(`unexpected decline on ${req.operation}`);
    return result.value;
  }
}

const isNotFound = (err: unknown): boolean =>
  isProviderErrorOfType(err, ErrorType.ProviderRejected) && err.details.status === 404;

/** Which adapter to build; only the generic REST adapter exists today. */
export type ProviderConfig = RestProviderConfig & { readonly kind?: 'rest' };

/** Builds a provider adapter from its configuration; `logger` is used when the configuration names none. */
export const createProvider = (config: ProviderConfig, logger?: Logger): RestProvider =>
  new RestProvider({ ...config, ...(config.logger === undefined && logger !== undefined ? { logger } : {}) });
