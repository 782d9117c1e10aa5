import { createHash } from 'node:crypto';
import type { Json, Operation } from './schemas';
import type { StoredResponse } from './state';
import { scopeKey, type SimStore } from './store';

/** JSON with object keys sorted at every level, so equal requests fingerprint equally whatever their key order. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

/** SHA-256 over the operation, the path and the parsed body: what makes two requests "the same". */
export function fingerprint(operation: Operation, path: string, body: Json): string {
  return createHash('sha256').update(canonicalJson({ operation, path, body })).digest('hex');
}

/** The result of claiming a key for a request. */
export type Claim =
  | { kind: 'new'; scope: string; apiKey: string; key: string; createdS: number; fingerprint: string }
  | { kind: 'replay'; response: StoredResponse }
  | { kind: 'mismatch' }
  | { kind: 'in_use' };

/** A key this request now holds. */
export type NewClaim = Extract<Claim, { kind: 'new' }>;

/** Stripe-style idempotency: first committed response per (api key, key) replayed until the key expires. */
export class IdempotencyTable {
  /** Keys whose first request is still running; memory only, since a restart ends every request. */
  private readonly inFlight = new Map<string, string>();

  constructor(private readonly store: SimStore) {}

  /**
   * Claims a key. Synchronous on purpose: check and claim must not be split by an await, or two concurrent
   * requests could both see the key free.
   */
  claim(apiKey: string, key: string, fp: string, ttlS: number): Claim {
    const scope = scopeKey(apiKey, key);
    const now = this.store.nowS();
    const record = this.store.idempotencyRecord(scope);
    if (record && record.created_s + ttlS <= now) this.store.expireIdempotencyRecord(scope);
    const live = this.store.idempotencyRecord(scope);
    if (live) return live.fingerprint === fp ? { kind: 'replay', response: live.response } : { kind: 'mismatch' };
    const running = this.inFlight.get(scope);
    if (running !== undefined) return running === fp ? { kind: 'in_use' } : { kind: 'mismatch' };
    this.inFlight.set(scope, fp);
    return { kind: 'new', scope, apiKey, key, createdS: now, fingerprint: fp };
  }

  /** Stores the committed response of a claimed key and releases it. */
  complete(claim: NewClaim, response: StoredResponse): void {
    this.store.setIdempotencyRecord(claim.scope, {
      api_key: claim.apiKey,
      key: claim.key,
      fingerprint: claim.fingerprint,
      created_s: claim.createdS,
      response,
    });
    this.inFlight.delete(claim.scope);
  }

  /** Releases a claimed key without storing anything (fault or crash before commit), so a retry can succeed. */
  release(claim: NewClaim): void {
    this.inFlight.delete(claim.scope);
  }

  /** Forgets running claims (reset). */
  clearInFlight(): void {
    this.inFlight.clear();
  }
}
