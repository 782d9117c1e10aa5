export * from './types';
export * from './errors';
export {
  HttpClient,
  ProviderErrorBody,
  classifyResponse,
  classifyTransportError,
  errorCodeOf,
  headerValue,
  parseRetryAfter,
  trackSend,
  type Classified,
  type ClassifyOptions,
  type HttpClientOptions,
  type HttpClock,
  type HttpHeaders,
  type HttpRequest,
  type HttpResponse,
} from './http';
export {
  createProviderLogger,
  defaultProviderLogger,
  keyHash,
  logAttempt,
  stripQuery,
  type AttemptLogEntry,
  type Logger,
} from './logging';
export * from './rest';
export * from './stripe';
export {
  configuredCapabilities,
  createConfiguredProviders,
  webhookVerifiers,
  type ProvidersConfig,
  type WebhooksConfig,
} from './registry';
