/**
 * The soak's verdict, pure: from what the soak asked and was answered, each payment's final view, and the provider's
 * ledger, the money invariant (bench/money-invariant.ts, the one every harness holds) counted as double effects, stuck
 * payments and mismatches. A payment with a wallet part counts by its card side (bench/wallet-invariants.ts' cardSide);
 * its wallet side is bench/soak-wallets.ts'.
 */
import { providerIdempotencyKey } from '../src/activities/keys';
import { type InvariantInput, type InvariantView, checkMoneyInvariant } from './money-invariant';
import { type LedgerEntry, cardSide } from './wallet-invariants';

/** One payment the soak drove. */
export interface SoakPayment {
  readonly key: string;
  readonly orderId: string;
  readonly amount: number;
  readonly capture: 'automatic' | 'manual';
  readonly declines: boolean;
  /** Its wallet part (automatic capture only): the card is charged the rest. */
  readonly wallet?: { readonly walletId: string; readonly amount: number };
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

/**
 * What a payment's charge answers (in order) say about it, the one definition the soak and its verdict share:
 * - `refused`: answered, and every answer 4xx: nothing started, there is no view to wait for;
 * - `unanswered`: no answer at all (the soak gave up, the connection kept dropping), or the last one neither 2xx nor
 *   4xx (a 5xx, a 503 past the soak's repeat window): an order service repeats such a charge, same key and body;
 * - `taken`: otherwise (a 2xx came, or a 4xx came last after a 5xx, which may hide a start): there is a payment to
 *   read ({@link neverStarted} says when the read shows there is none).
 * An unanswered payment is no refused one: the verdict waits for its view.
 */
export type ChargeState = 'refused' | 'unanswered' | 'taken';

export function chargeState(charges: readonly Pick<SoakAnswer, 'status'>[]): ChargeState {
  const is4xx = (a: Pick<SoakAnswer, 'status'>) => a.status >= 400 && a.status < 500;
  const last = charges.at(-1);
  if (last === undefined) return 'unanswered';
  if (charges.every(is4xx)) return 'refused';
  return is4xx(last) || (last.status >= 200 && last.status < 300) ? 'taken' : 'unanswered';
}

/**
 * Whether payment `key` never started, from its final read: refused, or `taken` only because a 5xx came before its
 * last answer, a 4xx (a 503 may hide a start that lands later, so such a payment is read), with no 2xx among its
 * answers and the API answering 404 for it once everything settled (e.g. a key of an order race whose first answer
 * was lost to the chaos, and whose repeat was 409 `payment_in_flight`: its start never happened).
 */
export function neverStarted(
  charges: ReadonlyMap<string, readonly Pick<SoakAnswer, 'status'>[]>,
  key: string,
  final: SoakView | undefined,
): boolean {
  const answers = charges.get(key) ?? [];
  if (chargeState(answers) === 'refused') return true;
  const last = answers.at(-1);
  return (
    last !== undefined &&
    last.status >= 400 &&
    last.status < 500 &&
    !answers.some((a) => a.status >= 200 && a.status < 300) &&
    final !== undefined &&
    'error' in final &&
    final.error === 'not found'
  );
}

/** The {@link chargeState} of payment `key` among `charges` (by payment, as {@link chargeAnswers} makes them). */
export const stateOf = (
  charges: ReadonlyMap<string, readonly Pick<SoakAnswer, 'status'>[]>,
  key: string,
): ChargeState => chargeState(charges.get(key) ?? []);

/** Each payment's charge answers, in the order given. */
export function chargeAnswers(answers: readonly SoakAnswer[]): Map<string, SoakAnswer[]> {
  const byPayment = new Map<string, SoakAnswer[]>();
  for (const a of answers) {
    if (a.kind !== 'charge') continue;
    const list = byPayment.get(a.payment);
    if (list) list.push(a);
    else byPayment.set(a.payment, [a]);
  }
  return byPayment;
}

/** Counts double effects, stuck payments and mismatches. */
export function checkSoak(
  merchantId: string,
  payments: readonly SoakPayment[],
  answers: readonly SoakAnswer[],
  views: ReadonlyMap<string, SoakView>,
  ledger: InvariantInput['ledger'],
  /** Views read before the final one (e.g. a review an operator then resolved). */
  earlier: ReadonlyMap<string, readonly InvariantView[]> = new Map(),
  /** The entries of the wallets the payments used (a refund's wallet share is not the provider's). */
  walletEntries: readonly Pick<LedgerEntry, 'kind' | 'operationId' | 'amount'>[] = [],
): SoakVerdict {
  const charges = chargeAnswers(answers);
  const card = cardSide(walletEntries);
  const byKey = new Map(payments.map((p) => [p.key, p]));
  const asked = new Map(answers.filter((a) => a.kind === 'refund').map((a) => [`${a.payment} ${a.opKey}`, a.amount]));
  const cardView = <V extends InvariantView>(p: SoakPayment, v: V | undefined) =>
    card.view(merchantId, p.wallet !== undefined, v, (key) => asked.get(`${p.key} ${key}`));
  const problems = checkMoneyInvariant({
    payments: payments
      .filter((p) => !card.walletOnly(p.amount, p.wallet))
      .map((p) => {
        const final = views.get(p.key) ?? { error: 'never read' };
        return {
          merchantId,
          key: p.key,
          capture: p.capture,
          ...(neverStarted(charges, p.key, final) ? {} : { final: 'error' in final ? final : cardView(p, final) }),
          earlier: (earlier.get(p.key) ?? []).map((v) => cardView(p, v) as InvariantView),
        };
      }),
    answers: answers.flatMap(({ payment, ...a }) => {
      const p = byKey.get(payment);
      const amount =
        p && a.kind === 'refund' ? card.refund(merchantId, p.wallet !== undefined, a.opKey, a.amount) : a.amount;
      if (p && (card.walletOnly(p.amount, p.wallet) || amount === 0)) return [];
      return [{ ...a, amount, merchantId, paymentKey: payment }];
    }),
    ledger,
  });
  // A payment taken for never started (a 5xx, then a 4xx, then not found) has no view to hold to the ledger: it must
  // have no create either.
  for (const p of payments) {
    if (stateOf(charges, p.key) === 'refused' || !neverStarted(charges, p.key, views.get(p.key))) continue;
    const providerKey = providerIdempotencyKey(merchantId, 'create', p.key);
    if (ledger.effects.some((e) => e.operation === 'create' && e.idempotency_key === providerKey)) {
      problems.push({
        kind: 'mismatch',
        message: `4: ${merchantId}/${p.key}: answered a 5xx then a 4xx and not found, yet the provider has its create`,
      });
    }
  }
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
