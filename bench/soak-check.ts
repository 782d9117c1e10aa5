/**
 * The soak's verdict, pure: from what the soak asked and was answered, each payment's final view, and the provider's
 * effect ledger, count double effects, stuck payments and mismatches (view vs ledger, HTTP answer vs ledger).
 */
import { providerIdempotencyKey } from '../src/activities/keys';
import type { LedgerEffect } from '../src/simulator/server';

/** One payment the soak drove. */
export interface SoakPayment {
  readonly key: string;
  readonly orderId: string;
  readonly amount: number;
  readonly capture: 'automatic' | 'manual';
  readonly declines: boolean;
}

/** One final HTTP answer the soak got (after its own retries of 503s and dropped connections). */
export interface SoakAnswer {
  readonly payment: string;
  readonly kind: 'charge' | 'capture' | 'refund';
  /** The capture's or refund's own key; the payment key for a charge. */
  readonly opKey: string;
  /** What was asked: the charge's amount, the capture's (undefined: all), the refund's. */
  readonly amount: number | undefined;
  readonly status: number;
  /** `status` of a PaymentView body, `error.type` of an error body. */
  readonly bodyStatus?: string;
  readonly errorType?: string;
  readonly amountAuthorized?: number;
}

/** A payment's final view (`GET /v1/payments/:key`), or why it could not be read. */
export type SoakView =
  | {
      readonly status: string;
      readonly amountAuthorized: number;
      readonly amountCaptured: number;
      readonly amountRefunded: number;
      readonly review?: { readonly reason: string };
      readonly operations?: readonly {
        readonly kind: string;
        readonly key: string;
        readonly state: string;
        readonly reason?: string;
      }[];
    }
  | { readonly error: string };

export interface SoakVerdict {
  readonly payments: number;
  readonly doubleEffects: number;
  readonly stuck: number;
  readonly mismatches: number;
  readonly needsReview: number;
  /** One line per problem found, for the report. */
  readonly problems: readonly string[];
}

/** What the provider did to one payment, from its effects. */
interface ProviderTotals {
  creates: LedgerEffect[];
  captured: number;
  refunded: number;
  voided: boolean;
}

/** Counts double effects, stuck payments and mismatches. */
export function checkSoak(
  merchantId: string,
  payments: readonly SoakPayment[],
  answers: readonly SoakAnswer[],
  views: ReadonlyMap<string, SoakView>,
  effects: readonly LedgerEffect[],
): SoakVerdict {
  const problems: string[] = [];
  let doubleEffects = 0;
  let stuck = 0;
  let mismatches = 0;
  let needsReview = 0;

  // Double effects: one idempotency key, more than one effect (any operation).
  const byKey = new Map<string, LedgerEffect[]>();
  for (const e of effects) {
    if (e.idempotency_key === null) continue;
    const k = `${e.operation}\n${e.idempotency_key}`;
    byKey.set(k, [...(byKey.get(k) ?? []), e]);
  }
  for (const [k, list] of byKey) {
    if (list.length > 1) {
      doubleEffects += list.length - 1;
      problems.push(`double effect: ${list.length} x ${k.replace('\n', ' key ')}`);
    }
  }

  const byReference = new Map<string, LedgerEffect[]>();
  for (const e of effects) byReference.set(e.reference, [...(byReference.get(e.reference) ?? []), e]);
  const totalsOf = (orderId: string): ProviderTotals => {
    const list = byReference.get(orderId) ?? [];
    const creates = list.filter((e) => e.operation === 'create');
    const captures = list.filter((e) => e.operation === 'capture');
    return {
      creates,
      // An automatic capture is captured by its create; a manual one by its capture.
      captured: captures.reduce((s, e) => s + e.amount, 0),
      refunded: list.filter((e) => e.operation === 'refund').reduce((s, e) => s + e.amount, 0),
      voided: list.some((e) => e.operation === 'void'),
    };
  };

  for (const p of payments) {
    const t = totalsOf(p.orderId);
    const authorized = t.creates[0]?.amount ?? 0;
    const captured = p.capture === 'automatic' ? (t.creates.length > 0 ? authorized : 0) : t.captured;
    // Exactly one create effect per payment (none for a decline).
    const expectedCreates = p.declines ? 0 : 1;
    if (t.creates.length > expectedCreates) {
      doubleEffects += t.creates.length - expectedCreates;
      problems.push(`${p.key}: ${t.creates.length} create effects`);
    }
    if (p.capture === 'automatic' && t.captured > 0) {
      doubleEffects += 1;
      problems.push(`${p.key}: a capture effect on an automatic-capture payment`);
    }
    if (captured > authorized) {
      doubleEffects += 1;
      problems.push(`${p.key}: captured ${captured} > authorized ${authorized}`);
    }
    if (t.refunded > captured) {
      doubleEffects += 1;
      problems.push(`${p.key}: refunded ${t.refunded} > captured ${captured}`);
    }

    const chargeAnswer = answers.find((a) => a.payment === p.key && a.kind === 'charge');
    if (chargeAnswer && chargeAnswer.status >= 400 && chargeAnswer.status < 500) continue; // refused: no payment
    const view = views.get(p.key);
    if (!view || 'error' in view) {
      stuck += 1;
      problems.push(`${p.key}: no view (${view && 'error' in view ? view.error : 'never read'})`);
      continue;
    }
    const running = (view.operations ?? []).filter((o) => o.state === 'running');
    if (view.status === 'pending' || view.status === 'unknown' || running.length > 0) {
      stuck += 1;
      problems.push(`${p.key}: stuck (${view.status}${running.length > 0 ? `, ${running.length} running` : ''})`);
      continue;
    }
    if (view.status === 'needs_review') {
      needsReview += 1;
      if (!view.review?.reason) {
        stuck += 1;
        problems.push(`${p.key}: needs_review without a reason`);
      }
    }
    for (const o of view.operations ?? []) {
      if (o.state === 'needs_review' && !o.reason) {
        stuck += 1;
        problems.push(`${p.key}: ${o.kind} ${o.key} in needs_review without a reason`);
      }
    }
    // Every view equals the provider's ledger (a payment in review may not know yet what the provider did).
    if (view.status !== 'needs_review') {
      const want = {
        authorized: t.creates.length > 0 ? authorized : 0,
        captured,
        refunded: t.refunded,
      };
      const got = { authorized: view.amountAuthorized, captured: view.amountCaptured, refunded: view.amountRefunded };
      if (want.authorized !== got.authorized || want.captured !== got.captured || want.refunded !== got.refunded) {
        mismatches += 1;
        problems.push(`${p.key}: view ${JSON.stringify(got)} != ledger ${JSON.stringify(want)} (${view.status})`);
      }
      const statusOk =
        t.creates.length === 0
          ? view.status === 'declined' || view.status === 'failed'
          : t.voided
            ? view.status === 'voided'
            : captured > 0
              ? view.status === 'succeeded'
              : view.status === 'authorized' || view.status === 'voided';
      if (!statusOk) {
        mismatches += 1;
        problems.push(`${p.key}: status ${view.status} contradicts the ledger (${t.creates.length} creates)`);
      }
    }
  }

  // No HTTP answer contradicts the ledger.
  const paymentsByKey = new Map(payments.map((p) => [p.key, p]));
  for (const a of answers) {
    const p = paymentsByKey.get(a.payment);
    if (!p) continue;
    const t = totalsOf(p.orderId);
    const contradiction = (why: string) => {
      mismatches += 1;
      problems.push(
        `${a.payment}: ${a.kind} ${a.opKey} answered ${a.status} ${a.bodyStatus ?? a.errorType ?? ''}: ${why}`,
      );
    };
    if (a.kind === 'charge') {
      if (a.status === 200 && (a.bodyStatus === 'succeeded' || a.bodyStatus === 'authorized')) {
        if (t.creates.length !== 1) contradiction(`${t.creates.length} create effects`);
        else if (a.amountAuthorized !== t.creates[0]?.amount) contradiction('amount differs from the effect');
      }
      if (a.status === 200 && a.bodyStatus === 'declined' && t.creates.length > 0) contradiction('a create effect');
      if (a.status >= 400 && a.status < 500 && t.creates.length > 0) contradiction('refused, yet a create effect');
      continue;
    }
    const providerKey = providerIdempotencyKey(merchantId, a.kind, a.opKey);
    const own = effects.filter((e) => e.operation === a.kind && e.idempotency_key === providerKey);
    if (a.status === 200 && own.length !== 1) contradiction(`${own.length} effects under its key`);
    if (a.status === 200 && a.amount !== undefined && own[0] !== undefined && own[0].amount !== a.amount) {
      contradiction(`effect amount ${own[0].amount} != asked ${a.amount}`);
    }
    if (a.status >= 400 && a.status < 500 && own.length > 0) contradiction('refused, yet an effect under its key');
  }

  return { payments: payments.length, doubleEffects, stuck, mismatches, needsReview, problems };
}
