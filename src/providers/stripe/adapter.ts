import { randomUUID } from 'node:crypto';
import Stripe from 'stripe';
import type { z } from 'zod';
import { ErrorType } from '../../domain/errors';
import { defaultReferenceLookupPages } from '../../domain/retry';
import { OutcomeUnknownError, ProviderRejectedError, isProviderErrorOfType } from '../errors';
import type { HttpClientOptions } from '../http';
import { defaultProviderLogger, keyHash, logAttempt, type Logger } from '../logging';
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
import { classifyStripeError } from './errors';
import { type CallScope, UndiciStripeHttpClient, callScope } from './transport';
import { PaymentIntentWire, RefundWire, intentState, referenceMetadataKey, toRefund } from './wire';

export interface StripeProviderConfig {
  /** Provider name (task queue, breaker key, metrics); default `stripe`. */
  readonly name?: string;
  /** `STRIPE_SECRET_KEY` (`sk_test_...` / `sk_live_...`); never logged. */
  readonly secretKey: string;
  /** `STRIPE_API_BASE`: default `https://api.stripe.com`; stripe-mock in tests. */
  readonly apiBase?: string;
  readonly connectTimeoutMs: number;
  readonly totalTimeoutMs: number;
  /** How long Stripe keeps an idempotency key (at least 24 hours). */
  readonly keyTtlSeconds?: number;
  /** Pages (of 100) a look-up by reference reads at most. */
  readonly referencePages?: number;
  readonly logger?: Logger;
  /** Transport tuning (connections, connector options, clock). */
  readonly http?: Pick<HttpClientOptions, 'connections' | 'connect' | 'clock'>;
  /** The longest Retry-After taken from an answer (`PROVIDER_MAX_RETRY_AFTER_MS`; default the HTTP client's). */
  readonly maxRetryAfterMs?: number;
}

/** Stripe keeps an idempotency key for at least 24 hours. */
export const stripeKeyTtlSeconds = 86_400;

/**
 * What Stripe can do: keys on every write (kept 24 h), no look-up by idempotency key, a look-up by our reference
 * through the Search API (over metadata; eventually consistent: a payment can take up to a minute to appear).
 */
export const stripeCapabilities = (keyTtlSeconds = stripeKeyTtlSeconds): ProviderCapabilities => ({
  idempotencyKeys: true,
  keyTtlSeconds,
  lookupByKey: false,
  lookupByReference: true,
});

type Operation = 'create' | 'capture' | 'void' | 'refund' | 'lookup';

const PAGE_LIMIT = 100;

/** A single-quoted value of Stripe's search query language. */
const quoted = (value: string): string => `'${value.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;

/**
 * The Stripe adapter: PaymentIntents (automatic and manual capture, partial capture, cancel as void) and Refunds over
 * the official SDK, with the SDK's retries off (`maxNetworkRetries: 0`: Temporal's retry policy is the only layer), our
 * undici transport underneath (connect timeout, total deadline, sent/not-sent), an `Idempotency-Key` on every write,
 * and every answer validated with zod and mapped to the domain's shape.
 */
export class StripeProvider implements PaymentProvider {
  readonly name: string;
  readonly capabilities: ProviderCapabilities;
  readonly #stripe: Stripe;
  readonly #transport: UndiciStripeHttpClient;
  readonly #logger: Logger;
  readonly #referencePages: number;
  readonly #maxRetryAfterMs: number | undefined;

  constructor(config: StripeProviderConfig) {
    this.name = config.name ?? 'stripe';
    this.#maxRetryAfterMs = config.maxRetryAfterMs;
    this.#referencePages = config.referencePages ?? defaultReferenceLookupPages;
    this.#logger = config.logger ?? defaultProviderLogger();
    this.capabilities = {
      ...stripeCapabilities(config.keyTtlSeconds),
      callLimits: { callTimeoutMs: config.totalTimeoutMs, referencePages: this.#referencePages },
    };
    const base = new URL(config.apiBase ?? 'https://api.stripe.com');
    this.#transport = new UndiciStripeHttpClient({
      ...config.http,
      baseUrl: base.origin,
      connectTimeoutMs: config.connectTimeoutMs,
      totalTimeoutMs: config.totalTimeoutMs,
      name: this.name,
      logger: this.#logger,
    });
    this.#stripe = new Stripe(config.secretKey, {
      maxNetworkRetries: 0,
      timeout: config.totalTimeoutMs,
      httpClient: this.#transport,
      host: base.hostname,
      port: base.port || (base.protocol === 'https:' ? 443 : 80),
      protocol: base.protocol === 'https:' ? 'https' : 'http',
      telemetry: false,
    });
  }

  /** Creates and confirms a PaymentIntent (captured at once, or authorized for a later capture); a decline is a value. */
  async createPayment(input: CreatePaymentInput, ctx: CallContext): Promise<CreatePaymentResult> {
    return this.#call('create', ctx, { declines: true }, async (scope) => {
      const pi = await this.#stripe.paymentIntents.create(
        {
          amount: input.amount,
          currency: input.currency.toLowerCase(),
          payment_method: input.paymentMethod,
          payment_method_types: ['card'],
          confirm: true,
          capture_method: input.capture === 'manual' ? 'manual' : 'automatic',
          metadata: { ...input.metadata, [referenceMetadataKey]: input.reference },
          expand: ['latest_charge'],
        },
        { idempotencyKey: ctx.idempotencyKey },
      );
      const state = intentState(parse(PaymentIntentWire, pi, 'create'));
      const replayed = scope.replayed === true;
      if (state.kind === 'payment') {
        const { payment } = state;
        if (payment.status === 'failed') return { outcome: 'declined', declineCode: payment.declineCode ?? 'failed' };
        if (payment.status !== 'voided') return { outcome: payment.status, payment, replayed };
      }
      // Confirmed but waiting for a payment method again: the card was refused (Stripe answers 402 for that, but
      // a replayed or an asynchronous refusal reads like this); an action other than a redirect: nobody can complete
      // it here, so nothing will move.
      if (state.kind === 'open') return { outcome: 'declined', declineCode: state.declineCode ?? state.status };
      throw new OutcomeUnknownError({ operation: 'create', reason: 'unexpected_status', code: pi.status });
    });
  }

  /** Captures an authorized PaymentIntent, in full when `amount` is absent (`amount_to_capture` otherwise). */
  async capturePayment(paymentId: string, body: { amount?: number }, ctx: CallContext): Promise<ProviderPayment> {
    return this.#call('capture', ctx, {}, async () =>
      this.#payment(
        'capture',
        await this.#stripe.paymentIntents.capture(
          paymentId,
          { ...(body.amount === undefined ? {} : { amount_to_capture: body.amount }), expand: ['latest_charge'] },
          { idempotencyKey: ctx.idempotencyKey },
        ),
      ),
    );
  }

  /** Cancels an authorized PaymentIntent (our void). */
  async voidPayment(paymentId: string, ctx: CallContext): Promise<ProviderPayment> {
    return this.#call('void', ctx, {}, async () =>
      this.#payment(
        'void',
        await this.#stripe.paymentIntents.cancel(
          paymentId,
          { expand: ['latest_charge'] },
          { idempotencyKey: ctx.idempotencyKey },
        ),
      ),
    );
  }

  /** Refunds part or all of a captured PaymentIntent. */
  async refundPayment(paymentId: string, body: { amount: number }, ctx: CallContext): Promise<ProviderRefund> {
    return this.#call('refund', ctx, {}, async () => {
      const refund = parse(
        RefundWire,
        await this.#stripe.refunds.create(
          { payment_intent: paymentId, amount: body.amount },
          { idempotencyKey: ctx.idempotencyKey },
        ),
        'refund',
      );
      if (refund.status === 'succeeded') return toRefund(refund, paymentId);
      if (refund.status === 'failed' || refund.status === 'canceled') {
        throw new ProviderRejectedError({ operation: 'refund', code: `refund_${refund.status}`, reason: 'status' });
      }
      // `pending` / `requires_action`: accepted, not done; the reconcile reads the charge's refunded total later.
      throw new OutcomeUnknownError({ operation: 'refund', reason: 'refund_pending', code: refund.status ?? 'none' });
    });
  }

  /** The PaymentIntent, or null when Stripe has none with this id or it never moved money. */
  async getPayment(paymentId: string, ctx?: LookupContext): Promise<ProviderPayment | null> {
    return this.#call('lookup', ctx, {}, async () => {
      try {
        const pi = await this.#stripe.paymentIntents.retrieve(paymentId, { expand: ['latest_charge'] });
        return this.#lookedUp(parse(PaymentIntentWire, pi, 'lookup'));
      } catch (err) {
        const failure = classifyStripeError(err, 'lookup');
        if (
          failure.kind === 'error' &&
          isProviderErrorOfType(failure.error, ErrorType.ProviderRejected) &&
          failure.error.details.status === 404
        ) {
          return null;
        }
        throw err;
      }
    });
  }

  /** Stripe cannot be asked by idempotency key (`capabilities.lookupByKey` is false): callers never get here. */
  async findByIdempotencyKey(): Promise<ProviderPayment | null> {
    throw new ProviderRejectedError({ operation: 'lookup', reason: 'unsupported', code: 'lookup_by_key_unsupported' });
  }

  /**
   * Every PaymentIntent whose metadata carries this reference, through the Search API (eventually consistent: up to
   * about a minute behind). More than `referencePages` pages is OutcomeUnknown (`lookup_truncated`).
   */
  async findByReference(reference: string, ctx?: LookupContext): Promise<ProviderPayment[]> {
    return this.#call('lookup', ctx, {}, async () => {
      const found: ProviderPayment[] = [];
      let page: string | undefined;
      for (let i = 0; i < this.#referencePages; i++) {
        const result = await this.#stripe.paymentIntents.search({
          query: `metadata[${quoted(referenceMetadataKey)}]:${quoted(reference)}`,
          limit: PAGE_LIMIT,
          expand: ['data.latest_charge'],
          ...(page === undefined ? {} : { page }),
        });
        found.push(...this.#payments(result.data));
        if (!result.has_more || !result.next_page) return found;
        page = result.next_page;
      }
      throw new OutcomeUnknownError({ operation: 'lookup', reason: 'lookup_truncated' });
    });
  }

  /** One page of PaymentIntents by creation time, for the sweep (only those that moved or hold money). */
  async listPayments(
    query: ListPaymentsQuery,
    ctx?: LookupContext,
  ): Promise<{ data: ProviderPayment[]; hasMore: boolean }> {
    return this.#call('lookup', ctx, {}, async () => {
      const created: { gte?: number; lt?: number } = {};
      if (query.createdGte !== undefined) created.gte = query.createdGte;
      if (query.createdLt !== undefined) created.lt = query.createdLt;
      const result = await this.#stripe.paymentIntents.list({
        ...(Object.keys(created).length > 0 ? { created } : {}),
        ...(query.startingAfter === undefined ? {} : { starting_after: query.startingAfter }),
        limit: Math.min(query.limit ?? PAGE_LIMIT, PAGE_LIMIT),
        expand: ['data.latest_charge'],
      });
      return { data: this.#payments(result.data), hasMore: result.has_more };
    });
  }

  /** Closes the connection pool; in-flight calls fail. */
  async close(): Promise<void> {
    await this.#transport.close();
  }

  #payment(operation: Operation, raw: unknown): ProviderPayment {
    const state = intentState(parse(PaymentIntentWire, raw, operation));
    if (state.kind === 'payment') return state.payment;
    throw new OutcomeUnknownError({ operation, reason: 'unexpected_status', code: state.kind });
  }

  #lookedUp(pi: PaymentIntentWire): ProviderPayment | null {
    const state = intentState(pi);
    if (state.kind === 'payment') return state.payment;
    // Still processing: money may yet move, so this is no answer.
    if (state.kind === 'processing') throw new OutcomeUnknownError({ operation: 'lookup', reason: 'processing' });
    return null;
  }

  #payments(raw: readonly unknown[]): ProviderPayment[] {
    return raw.flatMap((item) => {
      const state = intentState(parse(PaymentIntentWire, item, 'lookup'));
      return state.kind === 'payment' ? [state.payment] : [];
    });
  }

  /** One call: its scope for the transport, exactly one log line, and every failure classified. */
  async #call<T>(
    operation: Operation,
    ctx: CallContext | LookupContext | undefined,
    options: { readonly declines?: boolean },
    run: (scope: CallScope) => Promise<T>,
  ): Promise<T> {
    const requestId = ctx?.requestId ?? `req_${randomUUID()}`;
    const scope: CallScope = { requestId, ...(ctx?.signal === undefined ? {} : { signal: ctx.signal }) };
    const key = ctx !== undefined && 'idempotencyKey' in ctx ? ctx.idempotencyKey : undefined;
    const started = performance.now();
    const base = {
      provider: this.name,
      operation,
      method: operation === 'lookup' ? 'GET' : 'POST',
      route: `stripe:${operation}`,
      requestId,
      ...(key === undefined ? {} : { keyHash: keyHash(key) }),
      ...(ctx?.attempt === undefined ? {} : { attempt: ctx.attempt }),
    };
    const durationMs = () => Math.round(performance.now() - started);
    try {
      const value = await callScope.run(scope, () => run(scope));
      const declined =
        typeof value === 'object' && value !== null && 'outcome' in value && value.outcome === 'declined';
      logAttempt(this.#logger, {
        ...base,
        ...(scope.status === undefined ? {} : { status: scope.status }),
        outcome: declined ? 'declined' : 'succeeded',
        ...(scope.replayed === true ? { replayed: true } : {}),
        durationMs: durationMs(),
      });
      return value;
    } catch (err) {
      const maxRetryAfterMs = this.#maxRetryAfterMs;
      const failure = classifyStripeError(err, operation, {
        ...options,
        ...(maxRetryAfterMs === undefined ? {} : { maxRetryAfterMs }),
      });
      if (failure.kind === 'declined') {
        logAttempt(this.#logger, {
          ...base,
          status: 402,
          outcome: 'declined',
          code: failure.code,
          durationMs: durationMs(),
        });
        return { outcome: 'declined', declineCode: failure.code } as T;
      }
      const { status, code, retryAfterMs, reason } = failure.error.details;
      logAttempt(this.#logger, {
        ...base,
        ...(status === undefined ? {} : { status }),
        outcome: failure.error.type,
        reason,
        ...(code === undefined ? {} : { code }),
        ...(retryAfterMs === undefined ? {} : { retryAfterMs }),
        durationMs: durationMs(),
      });
      throw failure.error;
    }
  }
}

/** A 2xx whose body is not the object we asked for is an unknown outcome: it may have had its effect. */
function parse<S extends z.ZodType>(schema: S, raw: unknown, operation: Operation): z.output<S> {
  const parsed = schema.safeParse(raw);
  if (!parsed.success) {
    throw new OutcomeUnknownError({ operation, reason: 'unparseable' }, { cause: parsed.error });
  }
  return parsed.data;
}
