export * from './types';
export * from './errors';
export * from './schemas';
export {
  HttpClient,
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
export {
  RestProvider,
  createProvider,
  simulatorCapabilities,
  simulatorCapabilitiesWithoutKeys,
  type ProviderConfig,
  type RestOperation,
  type RestProviderConfig,
} from './simulator-rest';
