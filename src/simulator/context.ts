import type { FaultInjector } from './faults';
import type { IdempotencyTable } from './idempotency';
import type { Operation } from './schemas';
import type { SimStore } from './store';
import type { WebhookDispatcher } from './webhooks';

/** One structured log line. Never carries api keys, payment methods or request bodies. */
export interface SimLogEntry {
  level: 'info' | 'error';
  msg: string;
  method?: string;
  path?: string;
  operation?: Operation;
  status?: number | null;
  fault?: string;
  ms?: number;
  error?: string;
}

/** Everything a request handler needs, built once per simulator. */
export interface SimContext {
  store: SimStore;
  idempotency: IdempotencyTable;
  faults: FaultInjector;
  webhooks: WebhookDispatcher;
  /** Resolves when every committed change is durable; immediate without a state file. */
  persist(): Promise<void>;
  /** The simulator's own base URL once it listens (the customer's page of a payment waiting for them is under it). */
  baseUrl: string;
  /** Aborted when the simulator closes: cancels injected latency. */
  signal: AbortSignal;
  log(entry: SimLogEntry): void;
}
