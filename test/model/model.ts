/**
 * The model of one sequence: what the test asked for and what it was told. Commands read it to pick their targets and
 * record every answer in it; the end-of-sequence checks hold the answers against the provider's ledger.
 */
import { ApiErrorType } from '../../src/domain/api-schemas';
import type { PaymentView } from '../../src/domain/payment';
import type { ApiResponse } from '../helpers/world';
import type { MerchantName } from './world';

/** A charge body as the test sends it. */
export interface ChargeBody {
  readonly orderId: string;
  readonly amount: { readonly value: number; readonly currency: string };
  readonly paymentMethod: string;
  readonly capture: 'automatic' | 'manual';
  readonly provider?: string;
  /** The part taken from the merchant's wallet first (docs/http-api.md#payments-with-a-wallet-part). */
  readonly wallet?: { readonly walletId: string; readonly amount: number };
}

/** The body without its wallet part: a card-only copy (another merchant has none of this merchant's wallets). */
export const cardOnly = ({ wallet: _, ...body }: ChargeBody): ChargeBody => body;

/** A wallet the sequence credited: its merchant and id (the id carries the run's id). */
export interface WalletRec {
  readonly merchant: MerchantName;
  readonly walletId: string;
  /** The credits sent to it and the balance each first answer showed, for exact repeats. */
  readonly credits: { readonly key: string; readonly amount: number; readonly balance: number }[];
}

/** A payment the API accepted (2xx) under (merchant, key). */
export interface PaymentRec {
  readonly merchant: MerchantName;
  readonly key: string;
  readonly body: ChargeBody;
  /** The newest view an answer or a read carried (a replayed first answer does not take it back). */
  view?: PaymentView;
  /** Every view read, oldest first (the invariant holds each, not only the last: see {@link see}). */
  readonly views: PaymentView[];
  /** The cancels of it the provider was set to refuse first (CustomerCharge's `refusedCancels`). */
  refusedCancels?: { readonly times: number; readonly status: number };
}

/** Records a view of the payment read from an answer or a GET. */
export function see(p: PaymentRec, view: PaymentView): void {
  // A repeat replays its first answer, older than what later answers showed: the newest view stays the one known.
  if (p.view === undefined || view.updatedAt >= p.view.updatedAt) p.view = view;
  p.views.push(view);
}

/** A capture or refund request under its own key. */
export interface OpRec {
  readonly kind: 'capture' | 'refund';
  readonly merchant: MerchantName;
  readonly paymentKey: string;
  readonly key: string;
  readonly body: { readonly amount?: number };
  /** Its first answer took it on (2xx, or the provider's refusal): the key is used, another use is a reuse. */
  readonly consumed: boolean;
  /**
   * Sent while the provider was down: once the provider is back, its reconcile settles it (a resend with the same key)
   * and it is never in review. The command that sent it; cleared when a later adversary takes the provider away again
   * (the one resend may then meet it too).
   */
  settlesWithoutOperator?: string;
}

/** One answer the test saw, kept for the checks against the ledger. */
export interface Seen {
  readonly step: number;
  readonly what: 'charge' | 'capture' | 'refund';
  readonly merchant: MerchantName;
  readonly paymentKey: string;
  /** The capture/refund key (the payment key for a charge). */
  readonly key: string;
  /** The requested amount (undefined: a full capture). */
  readonly amount: number | undefined;
  readonly status: number;
  readonly body: ApiResponse['body'];
}

/** Everything one sequence did and saw. */
export interface Model {
  readonly runId: string;
  readonly payments: PaymentRec[];
  readonly ops: OpRec[];
  readonly wallets: WalletRec[];
  readonly seen: Seen[];
  /** One line per command with its answers: printed with a failure. */
  readonly trace: string[];
  /** The last number {@link fresh} handed out. */
  counter: number;
}

/** A fresh model; `runId` scopes every key and order id of the sequence. */
export function newModel(runId: string): Model {
  return { runId, payments: [], ops: [], wallets: [], seen: [], trace: [], counter: 0 };
}

/** A broken promise about money or about the API contract. */
export class ModelViolation extends Error {
  override readonly name = 'ModelViolation';
}

/** A fresh name within the run. */
export const fresh = (m: Model, prefix: string): string => `${prefix}_${m.runId}_${(m.counter += 1)}`;

const errorTypes: ReadonlySet<string> = new Set(ApiErrorType.options);

/** `status error.type` (or `status view.status`), for traces. */
export function describeAnswer(r: ApiResponse): string {
  if (r.status >= 400) return `${r.status} ${r.body.error?.type ?? '(untyped)'}`;
  const v = r.body as Partial<PaymentView>;
  return `${r.status} ${v.status ?? '?'} auth=${v.amountAuthorized ?? '?'} cap=${v.amountCaptured ?? '?'} ref=${
    v.amountRefunded ?? '?'
  }`;
}

/**
 * Every answer: a 2xx carries a payment view, every refusal is a 4xx (or a 503 the caller may repeat) with a typed
 * `error.type`, and nothing else (another 5xx, untyped) is acceptable. Throws a {@link ModelViolation}.
 */
export function assertWellFormed(m: Model, what: string, r: ApiResponse): void {
  if (r.status >= 200 && r.status < 300) {
    if (typeof r.body.key !== 'string' || typeof r.body.status !== 'string')
      violation(m, `${what}: ${r.status} without a payment view: ${JSON.stringify(r.body)}`);
    return;
  }
  if (r.status < 400 || (r.status >= 500 && r.status !== 503))
    violation(m, `${what}: answered ${r.status}: ${JSON.stringify(r.body)}`);
  const type = r.body.error?.type;
  if (type === undefined || !errorTypes.has(type))
    violation(m, `${what}: a ${r.status} refusal without a typed error: ${JSON.stringify(r.body)}`);
}

/** Throws unless the answer is one of `allowed` (`200`, `202`, or `4xx:<error.type>`). */
export function assertOneOf(m: Model, what: string, r: ApiResponse, allowed: readonly string[]): void {
  assertWellFormed(m, what, r);
  const label = r.status >= 400 ? `${r.status}:${r.body.error?.type ?? ''}` : String(r.status);
  if (!allowed.includes(label))
    violation(m, `${what}: answered ${label}, expected one of ${allowed.join(', ')}: ${JSON.stringify(r.body)}`);
}

/** Throws a violation carrying the sequence so far. */
export function violation(m: Model, message: string): never {
  throw new ModelViolation(`${message}\n  sequence so far:\n    ${m.trace.join('\n    ')}`);
}

/** True for an answer that took the operation on: a 2xx, or the provider's refusal (a 4xx `provider_rejected`). */
export const accepted = (r: ApiResponse): boolean =>
  (r.status >= 200 && r.status < 300) || (r.status === 422 && r.body.error?.type === 'provider_rejected');

/** The payment record of a key, if the API accepted it. */
export const paymentOf = (m: Model, merchant: MerchantName, key: string): PaymentRec | undefined =>
  m.payments.find((p) => p.merchant === merchant && p.key === key);

/** Picks `index` among the payments that satisfy `prefer`, or among all payments when none does. */
export function pick(m: Model, index: number, prefer: (p: PaymentRec) => boolean): PaymentRec | undefined {
  const preferred = m.payments.filter(prefer);
  const from = preferred.length > 0 ? preferred : m.payments;
  return from[index % Math.max(from.length, 1)];
}
