import { randomBytes } from 'node:crypto';
import { MerchantSettings, type ListPaymentsQuery } from './schemas';
import type {
  IdempotencyRecord,
  Ledger,
  LedgerEffect,
  LedgerRequest,
  Payment,
  PaymentRecord,
  RefundRecord,
  SimChanges,
  SimState,
} from './state';

/** Scope of an idempotency key: keys are per api key. */
export const scopeKey = (apiKey: string, key: string): string => `${apiKey}\u0000${key}`;

/** The public view of a stored payment (drops the owner and the creating key). */
export function toPayment(p: PaymentRecord): Payment {
  return {
    id: p.id,
    status: p.status,
    amount: p.amount,
    amount_captured: p.amount_captured,
    amount_refunded: p.amount_refunded,
    currency: p.currency,
    reference: p.reference,
    created: p.created,
    ...(p.metadata ? { metadata: { ...p.metadata } } : {}),
    ...(p.next_action ? { next_action: { ...p.next_action } } : {}),
    ...(p.decline_code ? { decline_code: p.decline_code } : {}),
  };
}

/** Ascending (created, id): the list order, and the cursor order of `starting_after`. */
const byCreatedThenId = (a: Payment, b: Payment): number =>
  a.created - b.created || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);

/** The payment fields an operation changes after creating it. */
export type PaymentChange = Partial<
  Pick<PaymentRecord, 'status' | 'amount_captured' | 'amount_refunded' | 'decline_code'>
>;

/**
 * What changed since the last {@link SimStore.takeChanges}: ids and scopes of changed records, and how far the
 * append-only lists had been saved. `snapshot`: a change no journal line can say (reset, load) happened.
 */
interface Tracked {
  snapshot: boolean;
  merchants: Set<string>;
  payments: Set<string>;
  idempotency: Set<string>;
  expired: Map<string, { api_key: string; key: string }>;
  refundsSaved: number;
  effectsSaved: number;
  requestsSaved: number;
  requestUpdates: Set<number>;
}

/**
 * All simulator state in memory: merchants, payments, refunds, idempotency records, ledger and the clock. Every
 * change goes through a method here, which notes it, so a save writes what changed (a journal line) instead of
 * everything (a snapshot, whose cost grows with the payments held: 40.9 MB per effect at 31,000 payments).
 */
export class SimStore {
  private merchants = new Map<string, MerchantSettings>();
  private payments = new Map<string, PaymentRecord>();
  private refunds: RefundRecord[] = [];
  private ledgerData: Ledger = { effects: [], requests: [] };
  /** Position of each request in the ledger, to journal a status set after the request was saved. */
  private requestIndex = new WeakMap<LedgerRequest, number>();
  private clockOffsetS = 0;
  private seq = 0;
  /** Random per process, so ids of two simulators (or one restarted without state) never collide. */
  private readonly instance = randomBytes(4).toString('hex');
  /** Idempotency records by {@link scopeKey}; IdempotencyTable reads them and changes them through this store. */
  private readonly idempotencyRecords = new Map<string, IdempotencyRecord>();
  private tracked: Tracked = this.untracked(true);

  /** Current simulator time in unix seconds: the wall clock plus every `advance`. */
  nowS(): number {
    return Math.floor(Date.now() / 1000 + this.clockOffsetS);
  }

  /** Current simulator time in unix milliseconds (for measuring retry gaps finer than a second). */
  nowMs(): number {
    return Math.floor(Date.now() + this.clockOffsetS * 1000);
  }

  /** Moves the simulator clock forward; returns the new time. */
  advanceClock(seconds: number): number {
    this.clockOffsetS += seconds;
    return this.nowS();
  }

  /** The clock offset from the wall clock in seconds. */
  clockOffset(): number {
    return this.clockOffsetS;
  }

  /** A new id: a zero-padded sequence first, so ids created in the same second sort in creation order. */
  newId(prefix: 'pay' | 're'): string {
    this.seq += 1;
    return `${prefix}_${this.seq.toString(36).padStart(8, '0')}${this.instance}`;
  }

  /** Settings of a merchant, defaults when it was never configured. */
  merchant(apiKey: string): MerchantSettings {
    return this.merchants.get(apiKey) ?? MerchantSettings.parse({});
  }

  /** Replaces a merchant's settings. */
  setMerchant(apiKey: string, settings: MerchantSettings): void {
    this.merchants.set(apiKey, settings);
    this.tracked.merchants.add(apiKey);
  }

  /** A payment of this api key, undefined for unknown ids and other merchants' payments alike. */
  payment(apiKey: string, id: string): PaymentRecord | undefined {
    const p = this.payments.get(id);
    return p && p.api_key === apiKey ? p : undefined;
  }

  /** A payment by id, whatever its api key (the simulator's controls play the customer, who has none). */
  paymentById(id: string): PaymentRecord | undefined {
    return this.payments.get(id);
  }

  /** Stores a new payment. */
  addPayment(p: PaymentRecord): void {
    this.payments.set(p.id, p);
    this.tracked.payments.add(p.id);
  }

  /** Changes a stored payment in place (callers hold it), and drops `next_action` when `dropNextAction`. */
  updatePayment(p: PaymentRecord, change: PaymentChange, dropNextAction = false): void {
    Object.assign(p, change);
    if (dropNextAction) delete p.next_action;
    this.tracked.payments.add(p.id);
  }

  /** Stores a new refund. */
  addRefund(r: RefundRecord): void {
    this.refunds.push(r);
  }

  /** The live idempotency record of a scope ({@link scopeKey}), expired or not. */
  idempotencyRecord(scope: string): IdempotencyRecord | undefined {
    return this.idempotencyRecords.get(scope);
  }

  /** Stores the first committed outcome of a key. */
  setIdempotencyRecord(scope: string, record: IdempotencyRecord): void {
    this.idempotencyRecords.set(scope, record);
    this.tracked.idempotency.add(scope);
  }

  /** Forgets an expired key's record. */
  expireIdempotencyRecord(scope: string): void {
    const record = this.idempotencyRecords.get(scope);
    if (!record) return;
    this.idempotencyRecords.delete(scope);
    this.tracked.idempotency.delete(scope);
    this.tracked.expired.set(scope, { api_key: record.api_key, key: record.key });
  }

  /** A page of this api key's payments matching the query, in (created, id) order. */
  listPayments(apiKey: string, q: ListPaymentsQuery): { data: PaymentRecord[]; has_more: boolean } | 'unknown_cursor' {
    let cursor: PaymentRecord | undefined;
    if (q.starting_after !== undefined) {
      cursor = this.payment(apiKey, q.starting_after);
      if (!cursor) return 'unknown_cursor';
    }
    const matches = [...this.payments.values()]
      .filter(
        (p) =>
          p.api_key === apiKey &&
          (q.idempotency_key === undefined || p.idempotency_key === q.idempotency_key) &&
          (q.reference === undefined || p.reference === q.reference) &&
          (q.created_gte === undefined || p.created >= q.created_gte) &&
          (q.created_lt === undefined || p.created < q.created_lt) &&
          // A cursor compares by position, not membership, so pages stay stable while payments are added.
          (cursor === undefined || byCreatedThenId(p, cursor) > 0),
      )
      .sort(byCreatedThenId);
    return { data: matches.slice(0, q.limit), has_more: matches.length > q.limit };
  }

  /** Appends a committed effect to the ledger. */
  recordEffect(e: LedgerEffect): void {
    this.ledgerData.effects.push(e);
  }

  /** Appends a request to the ledger and returns the live entry, for {@link updateRequest} when it completes. */
  recordRequest(r: LedgerRequest): LedgerRequest {
    this.requestIndex.set(r, this.ledgerData.requests.push(r) - 1);
    return r;
  }

  /** Sets what became known of a recorded request (its fault, status, whether it was a replay). */
  updateRequest(r: LedgerRequest, change: Partial<Pick<LedgerRequest, 'status' | 'fault' | 'replayed'>>): void {
    Object.assign(r, change);
    const index = this.requestIndex.get(r);
    if (index !== undefined && index < this.tracked.requestsSaved) this.tracked.requestUpdates.add(index);
  }

  /** A deep copy of the ledger. */
  ledger(): Ledger {
    return structuredClone(this.ledgerData);
  }

  /** Forgets everything (merchants, payments, keys, ledger, clock). */
  reset(): void {
    this.load(emptyState());
  }

  /** Everything, ready to serialize; shares memory with the store, so serialize it before anything else runs. */
  toState(): SimState {
    return {
      version: 1,
      clock_offset_s: this.clockOffsetS,
      seq: this.seq,
      merchants: Object.fromEntries(this.merchants),
      payments: [...this.payments.values()],
      refunds: this.refunds,
      idempotency: [...this.idempotencyRecords.values()],
      ledger: this.ledgerData,
    };
  }

  /**
   * What changed since the last call, and starts noting anew: `snapshot` when only the whole state can say it (after a
   * reset or a load). Shares memory with the store, so serialize it before anything else runs.
   */
  takeChanges(): SimChanges | 'snapshot' {
    const t = this.tracked;
    this.tracked = this.untracked(false);
    if (t.snapshot) return 'snapshot';
    const pick = <T>(ids: Set<string>, from: Map<string, T>): T[] => [...ids].flatMap((id) => from.get(id) ?? []);
    const { effects, requests } = this.ledgerData;
    const changes: SimChanges = {
      clock_offset_s: this.clockOffsetS,
      seq: this.seq,
      merchants: Object.fromEntries([...t.merchants].map((k) => [k, this.merchant(k)])),
      payments: pick(t.payments, this.payments),
      refunds: this.refunds.slice(t.refundsSaved),
      idempotency: pick(t.idempotency, this.idempotencyRecords),
      idempotency_expired: [...t.expired.values()],
      effects: effects.slice(t.effectsSaved),
      requests: requests.slice(t.requestsSaved),
      request_updates: [...t.requestUpdates].flatMap((index) => {
        const request = requests[index];
        return request ? [{ index, request }] : [];
      }),
    };
    // Empty lists say nothing: leave them out of the line.
    for (const [name, value] of Object.entries(changes))
      if ((Array.isArray(value) && value.length === 0) || (name === 'merchants' && t.merchants.size === 0))
        delete changes[name as keyof SimChanges];
    return changes;
  }

  /** Replays one journal line over the state (loading a saved state). */
  applyChanges(c: SimChanges): void {
    this.clockOffsetS = c.clock_offset_s;
    this.seq = c.seq;
    for (const [apiKey, settings] of Object.entries(c.merchants ?? {})) this.merchants.set(apiKey, settings);
    for (const p of c.payments ?? []) this.payments.set(p.id, p);
    this.refunds.push(...(c.refunds ?? []));
    for (const k of c.idempotency_expired ?? []) this.idempotencyRecords.delete(scopeKey(k.api_key, k.key));
    for (const r of c.idempotency ?? []) this.idempotencyRecords.set(scopeKey(r.api_key, r.key), r);
    this.ledgerData.effects.push(...(c.effects ?? []));
    for (const r of c.requests ?? []) this.recordRequest(r);
    for (const u of c.request_updates ?? []) {
      const at = this.ledgerData.requests[u.index];
      if (!at)
        throw new Error(`journal updates request ${u.index}, beyond the ${this.ledgerData.requests.length} saved`);
      Object.assign(at, u.request);
    }
    this.tracked = this.untracked(true);
  }

  /** Replaces everything with a snapshot. */
  load(state: SimState): void {
    this.clockOffsetS = state.clock_offset_s;
    this.seq = state.seq;
    this.merchants = new Map(Object.entries(state.merchants));
    this.payments = new Map(state.payments.map((p) => [p.id, p]));
    this.refunds = [...state.refunds];
    this.ledgerData = { effects: structuredClone(state.ledger.effects), requests: [] };
    this.requestIndex = new WeakMap();
    for (const r of structuredClone(state.ledger.requests)) this.recordRequest(r);
    this.idempotencyRecords.clear();
    for (const r of state.idempotency) this.idempotencyRecords.set(scopeKey(r.api_key, r.key), r);
    this.tracked = this.untracked(true);
  }

  /** Nothing noted yet: the lists are saved up to their current length. */
  private untracked(snapshot: boolean): Tracked {
    return {
      snapshot,
      merchants: new Set(),
      payments: new Set(),
      idempotency: new Set(),
      expired: new Map(),
      refundsSaved: this.refunds.length,
      effectsSaved: this.ledgerData.effects.length,
      requestsSaved: this.ledgerData.requests.length,
      requestUpdates: new Set(),
    };
  }
}

/** The state of a fresh simulator. */
export function emptyState(): SimState {
  return {
    version: 1,
    clock_offset_s: 0,
    seq: 0,
    merchants: {},
    payments: [],
    refunds: [],
    idempotency: [],
    ledger: { effects: [], requests: [] },
  };
}
