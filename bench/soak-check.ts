/**
 * The soak's verdict, pure: from what the soak asked and was answered, each payment's final view, and the provider's
 * ledger, the money invariant (bench/money-invariant.ts, the one every harness holds) counted as double effects, stuck
 * payments and mismatches.
 */
import type { Ledger } from '../src/simulator/server';
import { type InvariantView, checkMoneyInvariant } from './money-invariant';

/** One payment the soak drove. */
export interface SoakPayment {
  readonly key: string;
  readonly orderId: string;
  readonly amount: number;
  readonly capture: 'automatic' | 'manual';
  readonly declines: boolean;
}

/** One final HTTP answer the soak got (after its own retries of 503s and dropped connections), in order. */
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
  readonly providerPaymentId?: string;
  /** The payment a 409 `payment_in_flight` names. */
  readonly namedKey?: string;
  readonly failedOver?: boolean;
}

/** A payment's final view (`GET /v1/payments/:key`), or why it could not be read. */
export type SoakView = InvariantView | { readonly error: string };

export interface SoakVerdict {
  readonly payments: number;
  readonly doubleEffects: number;
  readonly stuck: number;
  readonly mismatches: number;
  readonly needsReview: number;
  /** One line per problem found, for the report. */
  readonly problems: readonly string[];
}

/** Counts double effects, stuck payments and mismatches. */
export function checkSoak(
  merchantId: string,
  payments: readonly SoakPayment[],
  answers: readonly SoakAnswer[],
  views: ReadonlyMap<string, SoakView>,
  ledger: Pick<Ledger, 'effects'> & Partial<Pick<Ledger, 'requests'>>,
  /** Views read before the final one (e.g. a review an operator then resolved). */
  earlier: ReadonlyMap<string, readonly InvariantView[]> = new Map(),
): SoakVerdict {
  const refused = (p: SoakPayment) => {
    const charges = answers.filter((a) => a.payment === p.key && a.kind === 'charge');
    // Refused (4xx) and never taken on: nothing started, there is no view to wait for.
    return charges.length > 0 && charges.every((a) => a.status >= 400 && a.status < 500);
  };
  const problems = checkMoneyInvariant({
    payments: payments.map((p) => ({
      merchantId,
      key: p.key,
      capture: p.capture,
      ...(refused(p) ? {} : { final: views.get(p.key) ?? { error: 'never read' } }),
      earlier: earlier.get(p.key) ?? [],
    })),
    answers: answers.map(({ payment, ...a }) => ({ ...a, merchantId, paymentKey: payment })),
    ledger,
  });
  const count = (kind: string) => problems.filter((p) => p.kind === kind).length;
  const needsReview = [...views.values()].filter((v) => 'status' in v && v.status === 'needs_review').length;
  return {
    payments: payments.length,
    doubleEffects: count('double'),
    stuck: count('stuck'),
    mismatches: count('mismatch'),
    needsReview,
    problems: problems.map((p) => `${p.kind}: ${p.message}`),
  };
}
