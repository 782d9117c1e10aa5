import { AsyncLocalStorage } from 'node:async_hooks';
import Stripe from 'stripe';
import { HttpClient, headerValue, type HttpClientOptions, type HttpHeaders } from '../http';

/** What one adapter call lends the transport below the SDK: its cancellation, its id, and what the wire answered. */
export interface CallScope {
  readonly requestId?: string;
  readonly signal?: AbortSignal;
  /** Set by the transport: the HTTP status of the answer, when one arrived. */
  status?: number;
  /** Set by the transport: Stripe replayed the stored answer of this idempotency key (`Idempotent-Replayed`). */
  replayed?: boolean;
}

/** The scope of the adapter call in progress (the SDK calls the transport inside the same async context). */
export const callScope = new AsyncLocalStorage<CallScope>();

class BufferedResponse extends Stripe.HttpClientResponse {
  readonly #body: string;

  constructor(status: number, headers: HttpHeaders, body: string) {
    const flat: Record<string, string> = {};
    for (const [name, value] of Object.entries(headers)) {
      if (value !== undefined) flat[name.toLowerCase()] = Array.isArray(value) ? value.join(', ') : value;
    }
    super(status, flat);
    this.#body = body;
  }

  override getRawResponse(): unknown {
    return {};
  }

  override toStream(): never {
    throw new Error('streaming answers are not used');
  }

  override toJSON(): Promise<unknown> {
    return new Promise((resolve) => resolve(this._parseResponseBody(this.#body)));
  }
}

/**
 * The Stripe SDK's HTTP layer, replaced by ours (undici, one pool per provider): our connect timeout and total deadline,
 * the activity's cancellation, and above all whether a failed request had left (NotSent) or not (OutcomeUnknown),
 * which the SDK's own client cannot say. Failures reject with our {@link ProviderError}; it carries no `code`, so the
 * SDK never takes it for a closed connection and never retries it (its one retry even at `maxNetworkRetries: 0`).
 */
export class UndiciStripeHttpClient extends Stripe.HttpClient {
  readonly #http: HttpClient;

  constructor(options: HttpClientOptions) {
    super();
    this.#http = new HttpClient(options);
  }

  override getClientName(): string {
    return 'payment-workflows-undici';
  }

  override async makeRequest(
    _host: string,
    _port: string,
    path: string,
    method: string,
    headers: Record<string, string | number | string[] | null | undefined>,
    requestData: string,
    _protocol: string,
    timeout: number,
  ): Promise<BufferedResponse> {
    const scope = callScope.getStore();
    const sent: Record<string, string> = {};
    for (const [name, value] of Object.entries(headers)) {
      if (value !== undefined && value !== null) sent[name] = Array.isArray(value) ? value.join(', ') : String(value);
    }
    const response = await this.#http.send({
      method: method === 'POST' ? 'POST' : method === 'DELETE' ? 'DELETE' : 'GET',
      path,
      operation: 'stripe',
      headers: sent,
      ...(requestData ? { body: requestData } : {}),
      totalTimeoutMs: timeout,
      ...(scope?.requestId === undefined ? {} : { requestId: scope.requestId }),
      ...(scope?.signal === undefined ? {} : { signal: scope.signal }),
    });
    if (scope) {
      scope.status = response.status;
      scope.replayed = headerValue(response.headers, 'idempotent-replayed') === 'true';
    }
    return new BufferedResponse(response.status, response.headers, response.body);
  }

  async close(): Promise<void> {
    await this.#http.close();
  }
}
