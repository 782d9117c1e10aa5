import type { FaultRule, Operation } from './schemas';

/** Seeded PRNG (mulberry32): the same seed and the same request sequence give the same faults. */
export function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** What a request looks like to the fault matcher. */
export interface FaultTarget {
  operation: Operation;
  /** The payment's reference (the body's for create), null when unknown. */
  reference: string | null;
  /** The idempotency key (for a lookup: the `idempotency_key` query), null when absent. */
  key: string | null;
}

/** An active rule and how many hits it has left. */
export interface FaultRuleView extends FaultRule {
  /** Hits left; null: unlimited. */
  remaining: number | null;
  hits: number;
}

const DEFAULT_SEED = 0x5eed;

/** The active fault rules; the first live rule that matches (and wins its probability draw) hits the request. */
export class FaultInjector {
  private rules: FaultRuleView[] = [];
  private random = mulberry32(DEFAULT_SEED);

  /** Adds rules after the existing ones; a seed restarts the PRNG. */
  add(rules: FaultRule[], seed?: number): void {
    if (seed !== undefined) this.random = mulberry32(seed);
    for (const r of rules) this.rules.push({ ...r, remaining: r.times ?? null, hits: 0 });
  }

  /** Removes every rule and restarts the PRNG from the default seed. */
  clear(): void {
    this.rules = [];
    this.random = mulberry32(DEFAULT_SEED);
  }

  /** Copies of the rules, spent ones included (remaining 0), so tests can see what hit. */
  list(): FaultRuleView[] {
    return this.rules.map((r) => ({ ...r, match: { ...r.match } }));
  }

  /** The rule that hits this request, if any; a hit counts against the rule's `times`. */
  match(target: FaultTarget): FaultRule | undefined {
    for (const rule of this.rules) {
      if (rule.remaining === 0) continue;
      const m = rule.match;
      if (m.operation !== undefined && m.operation !== target.operation) continue;
      if (m.reference !== undefined && m.reference !== target.reference) continue;
      if (m.key !== undefined && m.key !== target.key) continue;
      // Draw only for rules that otherwise match, so unrelated traffic does not shift the sequence.
      if (rule.probability !== undefined && !(this.random() < rule.probability)) continue;
      if (rule.remaining !== null) rule.remaining -= 1;
      rule.hits += 1;
      return rule;
    }
    return undefined;
  }
}
