/**
 * Time to resolution (issue 21 §4): of the payments and the captures and refunds whose outcome the soak saw unknown,
 * how long each took from its first unknown to its final answer, and which of them an operator settled. Fed from the
 * views and answers the soak reads; it judges nothing, it measures.
 */
import { percentile } from './stats';

/** The part of a PaymentView this reads. */
export interface AmbiguityView {
  readonly status?: string;
  readonly unknownSince?: string;
  readonly updatedAt?: string;
  readonly operations?: readonly { readonly kind: string; readonly key: string; readonly state: string }[];
}

interface Ambiguous {
  /** What was unknown: the payment's create, or one of its captures or refunds. */
  readonly kind: string;
  /** Epoch ms of the first unknown: the view's `unknownSince` for a create, the 202's arrival for a capture/refund. */
  readonly since: number;
  /** Epoch ms of the first final view seen. */
  final?: number;
  /** An operator's verdict was accepted for it. */
  byOperator: boolean;
}

/** The summary line's numbers. */
export interface AmbiguitySummary {
  readonly unknown: number;
  readonly settled: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  /** Of the settled ones, the share no operator had to settle, in %. */
  readonly withoutOperatorPct: number;
  /** Still unknown, running or in review at the end. */
  readonly open: number;
  /** The same per kind (create, capture, refund): where the slow end of the distribution comes from. */
  readonly byKind: Readonly<
    Record<string, { readonly settled: number; readonly p50Ms: number; readonly p99Ms: number; readonly maxMs: number }>
  >;
}

const OPEN = ['pending', 'unknown', 'needs_review'];

/** Collects the soak's unknown outcomes and when they ended. */
export class AmbiguityTally {
  private readonly items = new Map<string, Ambiguous>();

  /** A payment's view, read at `atMs`. */
  observe(paymentKey: string, view: AmbiguityView, atMs: number): void {
    const create = this.items.get(paymentKey);
    // A payment in review because of one of its captures or refunds is that operation's review, not the create's.
    const createOpen =
      view.status === 'unknown' ||
      (view.status === 'needs_review' && !view.operations?.some((o) => o.state === 'needs_review'));
    if (createOpen && !create) {
      const since = view.unknownSince === undefined ? Number.NaN : Date.parse(view.unknownSince);
      this.start(paymentKey, 'create', Number.isNaN(since) ? atMs : since);
    } else if (create && create.final === undefined && view.status !== undefined && !OPEN.includes(view.status)) {
      const updated = view.updatedAt === undefined ? Number.NaN : Date.parse(view.updatedAt);
      create.final = Number.isNaN(updated) ? atMs : Math.max(create.since, updated);
    }
    for (const op of view.operations ?? []) {
      const item = this.items.get(opId(paymentKey, op.kind, op.key));
      if (!item) continue;
      if (item.final === undefined && op.state !== 'running' && op.state !== 'needs_review') item.final = atMs;
    }
  }

  /** A capture's or refund's answer, arrived at `atMs`: a 202 is an outcome still unknown (its reconcile goes on). */
  movementAnswered(paymentKey: string, kind: string, opKey: string, status: number, atMs: number): void {
    const id = opId(paymentKey, kind, opKey);
    if (status === 202 && !this.items.has(id)) this.start(id, kind, atMs);
  }

  /** An operator's verdict on the payment's review (its create, or the operation `kind`/`opKey`) was accepted. */
  operatorResolved(paymentKey: string, op?: { readonly kind: string; readonly key: string }): void {
    const item = this.items.get(op === undefined ? paymentKey : opId(paymentKey, op.kind, op.key));
    if (item) item.byOperator = true;
  }

  summary(): AmbiguitySummary {
    const all = [...this.items.values()];
    const settled = all.filter((a) => a.final !== undefined);
    const durations = settled.map((a) => (a.final as number) - a.since).sort((x, y) => x - y);
    const withoutOperator = settled.filter((a) => !a.byOperator).length;
    const byKind: Record<string, { settled: number; p50Ms: number; p99Ms: number; maxMs: number }> = {};
    for (const kind of [...new Set(settled.map((a) => a.kind))].sort()) {
      const ds = settled
        .filter((a) => a.kind === kind)
        .map((a) => (a.final as number) - a.since)
        .sort((x, y) => x - y);
      byKind[kind] = {
        settled: ds.length,
        p50Ms: percentile(ds, 50),
        p99Ms: percentile(ds, 99),
        maxMs: ds[ds.length - 1] ?? Number.NaN,
      };
    }
    return {
      byKind,
      unknown: all.length,
      settled: settled.length,
      p50Ms: percentile(durations, 50),
      p99Ms: percentile(durations, 99),
      withoutOperatorPct: settled.length === 0 ? 100 : (100 * withoutOperator) / settled.length,
      open: all.length - settled.length,
    };
  }

  private start(id: string, kind: string, since: number): Ambiguous {
    const item: Ambiguous = { kind, since, byOperator: false };
    this.items.set(id, item);
    return item;
  }
}

const opId = (paymentKey: string, kind: string, opKey: string) => `${paymentKey}\u0000${kind}\u0000${opKey}`;

/** `ambiguity: N unknown, p50 X s, p99 Y s to final, A % without an operator` (and how many never ended). */
export function ambiguityLine(s: AmbiguitySummary): string {
  const sec = (ms: number) => (Number.isNaN(ms) ? '-' : `${(ms / 1000).toFixed(1)} s`);
  const open = s.open > 0 ? `; ${s.open} not final at the end` : '';
  return (
    `ambiguity: ${s.unknown} unknown, p50 ${sec(s.p50Ms)}, p99 ${sec(s.p99Ms)} to final, ` +
    `${s.withoutOperatorPct.toFixed(1)} % without an operator${open}`
  );
}

/** `ambiguity by kind: create 180 (p50 40.1 s, p99 300.2 s, max 320.0 s); capture ...`: where the p99 comes from. */
export function ambiguityByKindLine(s: AmbiguitySummary): string {
  const sec = (ms: number) => (Number.isNaN(ms) ? '-' : `${(ms / 1000).toFixed(1)} s`);
  const parts = Object.entries(s.byKind).map(
    ([kind, k]) => `${kind} ${k.settled} (p50 ${sec(k.p50Ms)}, p99 ${sec(k.p99Ms)}, max ${sec(k.maxMs)})`,
  );
  return `ambiguity by kind: ${parts.length === 0 ? 'none' : parts.join('; ')}`;
}
