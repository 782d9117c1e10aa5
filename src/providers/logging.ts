import { createHmac, randomBytes } from 'node:crypto';
import { pino, type DestinationStream, type Logger } from 'pino';

export type { Logger } from 'pino';

/** The key of {@link keyHash}: random per process until {@link configureKeyHash} sets the deployment's. */
let keyHashSecret: Buffer = randomBytes(32);

/**
 * Sets the key of every later {@link keyHash} in this process: config `LOG_HASH_SECRET` (the configured stack sets it
 * at start), so the API's and the workers' lines about one key carry the same hash.
 */
export const configureKeyHash = (secret: string): void => {
  keyHashSecret = Buffer.from(secret, 'utf8');
};

/**
 * First 16 hex digits of HMAC-SHA-256(`LOG_HASH_SECRET`, idempotency key): enough to correlate log lines, useless to
 * replay, and, unlike a plain digest, no way back to a guessable key (`order-1001`) for whoever reads the logs.
 */
export const keyHash = (idempotencyKey: string): string =>
  createHmac('sha256', keyHashSecret).update(idempotencyKey).digest('hex').slice(0, 16);

/** A path without its query string: query values (idempotency keys, references) stay out of the logs. */
export const stripQuery = (path: string): string => {
  const q = path.indexOf('?');
  return q === -1 ? path : path.slice(0, q);
};

// Defence in depth for the default logger only: the attempt log never carries these fields in the first place.
const redactPaths = [
  'apiKey',
  '*.apiKey',
  'authorization',
  '*.authorization',
  'headers',
  '*.headers',
  'paymentMethod',
  '*.paymentMethod',
  'payment_method',
  '*.payment_method',
  'idempotencyKey',
  '*.idempotencyKey',
  'body',
  '*.body',
];

/** The default provider logger: pino at `LOG_LEVEL` (default `info`), with sensitive field names redacted. */
export const createProviderLogger = (options: { level?: string; destination?: DestinationStream } = {}): Logger =>
  pino(
    {
      name: 'providers',
      level: options.level ?? process.env.LOG_LEVEL ?? 'info',
      redact: { paths: redactPaths, censor: '[redacted]' },
    },
    options.destination,
  );

let defaultLogger: Logger | undefined;

/** One process-wide default logger, created on first use. */
export const defaultProviderLogger = (): Logger => (defaultLogger ??= createProviderLogger());

/** What one provider call leaves in the log: one line per call, never a token, key, api key, header or body. */
export interface AttemptLogEntry {
  readonly provider: string;
  readonly operation: string;
  readonly method: string;
  /** Route template (`/v1/payments/:id/capture`) or the path without its query. */
  readonly route: string;
  readonly requestId: string;
  readonly keyHash?: string;
  readonly attempt?: number;
  readonly status?: number;
  /** `succeeded`, `declined` or the failure class (`OutcomeUnknown`, ...). */
  readonly outcome: string;
  readonly reason?: string;
  readonly code?: string;
  readonly retryAfterMs?: number;
  readonly replayed?: boolean;
  readonly durationMs: number;
}

/** Logs one attempt: `info` for an answer (success or decline), `warn` for a failure class. */
export const logAttempt = (logger: Logger, entry: AttemptLogEntry): void => {
  const answered = entry.outcome === 'succeeded' || entry.outcome === 'declined';
  const fields = Object.fromEntries(Object.entries(entry).filter(([, v]) => v !== undefined));
  if (answered) logger.info(fields, 'provider call');
  else logger.warn(fields, 'provider call');
};
