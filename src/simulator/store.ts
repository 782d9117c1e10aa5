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

/** All simulator state in memory: merchants, payments, refunds, idempotency records, ledger and the clock. */
export class SimStore {
  private merchants = new Map<string, MerchantSettings>();
  private payments = new Map<string, PaymentRecord>();
  private refunds: RefundRecord[] = [];
  private ledgerData: Ledger = { effects: [], requests: [] };
  private clockOffsetS = 0;
  private seq = 0;
  /** Random per process, so ids of two simulators (or one restarted without state) never collide. */
  private readonly instance = randomBytes(4).toString('hex');
  /** Idempotency records by {@link scopeKey}; owned by IdempotencyTable, stored here so they persist. */
  readonly idempotency = new Map<string, IdempotencyRecord>();

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
  }

  /** Stores a new refund. */
  addRefund(r: RefundRecord): void {
    this.refunds.push(r);
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

  /** Appends a request to the ledger and returns the live entry, so its status can be set when it completes. */
  recordRequest(r: LedgerRequest): LedgerRequest {
    this.ledgerData.requests.push(r);
    return r;
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
      idempotency: [...this.idempotency.values()],
      ledger: this.ledgerData,
    };
  }

  /** Replaces everything with a snapshot. */
  load(state: SimState): void {
    this.clockOffsetS = state.clock_offset_s;
    this.seq = state.seq;
    this.merchants = new Map(Object.entries(state.merchants));
    this.payments = new Map(state.payments.map((p) => [p.id, p]));
    this.refunds = [...state.refunds];
    this.ledgerData = structuredClone(state.ledger);
    this.idempotency.clear();
    for (const r of state.idempotency) this.idempotency.set(scopeKey(r.api_key, r.key), r);
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
