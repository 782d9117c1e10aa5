/**
 * What the Temporal web UI and CLI show for a payment: the workflow's static summary and details (set by the client
 * at start), activity and timer summaries (set where workflows schedule them), and the current details the charge
 * workflow keeps in step with its status. Pure functions, safe in workflow code. Never a payment method, a
 * description or any other customer data: only amount, currency, order, merchant, provider and status.
 */
import type { ProviderPayment } from './provider-payment';
import type { ProviderOperation } from './retry';

/** ISO 4217 minor-unit exponents that are not 2 (the rest of the active codes have two decimals). */
const exponentOf: Readonly<Record<string, number>> = {
  BIF: 0,
  CLP: 0,
  DJF: 0,
  GNF: 0,
  ISK: 0,
  JPY: 0,
  KMF: 0,
  KRW: 0,
  PYG: 0,
  RWF: 0,
  UGX: 0,
  VND: 0,
  VUV: 0,
  XAF: 0,
  XOF: 0,
  XPF: 0,
  BHD: 3,
  IQD: 3,
  JOD: 3,
  KWD: 3,
  LYD: 3,
  OMR: 3,
  TND: 3,
};

/** `EUR 10.00` from 1000 minor units: integer arithmetic only, no floats and no locale. */
export function formatMoney(minorUnits: number, currency: string): string {
  const exponent = exponentOf[currency] ?? 2;
  const sign = minorUnits < 0 ? '-' : '';
  const digits = String(Math.abs(minorUnits)).padStart(exponent + 1, '0');
  const whole = digits.slice(0, digits.length - exponent);
  return `${currency} ${sign}${whole}${exponent > 0 ? `.${digits.slice(digits.length - exponent)}` : ''}`;
}

/** The fields of a charge the summaries use. */
export interface PaymentFacts {
  readonly merchantId: string;
  readonly key: string;
  readonly orderId: string;
  readonly amount: { readonly value: number; readonly currency: string };
  readonly provider: string;
  readonly capture: 'automatic' | 'manual';
  /** The wallet part's amount (never the wallet's id: the merchant's own name, maybe a customer's). */
  readonly wallet?: { readonly amount: number } | undefined;
}

/** One line for the workflow list: `EUR 10.00 for order 1001 (merchant m1, simulator)`. */
export function paymentSummary(p: PaymentFacts): string {
  return `${formatMoney(p.amount.value, p.amount.currency)} for order ${p.orderId} (merchant ${p.merchantId}, ${p.provider})`;
}

/** The workflow's static details (Markdown in the web UI). */
export function paymentStaticDetails(p: PaymentFacts): string {
  return [
    `**${formatMoney(p.amount.value, p.amount.currency)}** for order \`${p.orderId}\``,
    '',
    `- merchant: \`${p.merchantId}\``,
    `- idempotency key: \`${p.key}\``,
    `- provider: ${p.provider}`,
    `- capture: ${p.capture}`,
    ...(p.wallet === undefined
      ? []
      : [
          `- wallet part: ${formatMoney(p.wallet.amount, p.amount.currency)} held first, the provider charged ` +
            formatMoney(p.amount.value - p.wallet.amount, p.amount.currency),
        ]),
  ].join('\n');
}

/** An operator's verdict as the current details tell it. */
export interface VerdictFacts {
  readonly operator?: string | undefined;
  readonly outcome: string;
  readonly note: string;
  readonly operation: string;
  readonly reviewReason: string;
  readonly at: string;
}

/** The view fields the current details show. */
export interface PaymentProgress {
  readonly status: string;
  readonly amount: { readonly value: number; readonly currency: string };
  readonly amountAuthorized: number;
  readonly amountCaptured: number;
  readonly amountRefunded: number;
  readonly attempts: number;
  readonly review?: { readonly reason: string } | undefined;
  readonly declineCode?: string | undefined;
  readonly verdicts?: readonly VerdictFacts[] | undefined;
  readonly wallet?: { readonly amount: number; readonly status: string; readonly refunded: number } | undefined;
}

/** The charge workflow's current details: its status, what moved and who decided, kept in step by the workflow. */
export function paymentCurrentDetails(v: PaymentProgress): string {
  const money = (n: number) => formatMoney(n, v.amount.currency);
  const lines = [
    `**${v.status}** after ${v.attempts} provider attempt${v.attempts === 1 ? '' : 's'}`,
    '',
    `- authorized ${money(v.amountAuthorized)}, captured ${money(v.amountCaptured)}, refunded ${money(v.amountRefunded)}`,
  ];
  if (v.wallet) {
    const { amount, status, refunded } = v.wallet;
    lines.push(`- wallet part ${money(amount)} **${status}**, refunded to the wallet ${money(refunded)}`);
  }
  if (v.status === 'requires_action') lines.push('- waits for the customer to authenticate the payment (3-D Secure)');
  if (v.declineCode) lines.push(`- declined: \`${v.declineCode}\``);
  if (v.review) lines.push(`- needs review: ${v.review.reason}`);
  for (const verdict of v.verdicts ?? []) lines.push(verdictLine(verdict));
  return lines.join('\n');
}

/** `- verdict on the capture: **failed** by operator:ops_1 at …, answering "capture not found …": <note>`. */
function verdictLine(d: VerdictFacts): string {
  const by = d.operator === undefined ? '' : ` by \`${d.operator}\``;
  return `- verdict on the ${d.operation}: **${d.outcome}**${by} at ${d.at}, answering "${d.reviewReason}": ${d.note}`;
}

/** A provider payment in one line: `pay_1 is authorized: EUR 10.00, captured EUR 0.00, refunded EUR 0.00`. */
export function describeProviderPayment(
  p: Pick<ProviderPayment, 'id' | 'status' | 'amount' | 'currency' | 'amountCaptured' | 'amountRefunded'>,
): string {
  const money = (n: number) => formatMoney(n, p.currency);
  return `${p.id} is ${p.status}: ${money(p.amount)}, captured ${money(p.amountCaptured)}, refunded ${money(p.amountRefunded)}`;
}

const operationVerb: Readonly<Record<ProviderOperation, string>> = {
  create: 'create payment',
  capture: 'capture payment',
  void: 'void payment',
  refund: 'refund payment',
  lookup: 'look up payment',
  list: 'list payments',
};

/** An activity's summary: `create payment at simulator`. */
export const activitySummary = (operation: ProviderOperation, provider: string): string =>
  `${operationVerb[operation]} at ${provider}`;

/** `30 s`, `2 min`, `1.5 h`, `30 d`: a wait as an operator reads it. */
export function formatWait(ms: number): string {
  if (ms < 60_000) return `${Math.round(ms / 100) / 10} s`;
  if (ms < 3_600_000) return `${Math.round(ms / 6_000) / 10} min`;
  if (ms < 2 * 86_400_000) return `${Math.round(ms / 360_000) / 10} h`;
  return `${Math.round(ms / 8_640_000) / 10} d`;
}

/** A reconcile timer's summary: `wait for a webhook or re-check create in 30 s`. */
export const reconcileWaitSummary = (operation: string, provider: string, ms: number): string =>
  `wait for a webhook or re-check ${operation} at ${provider} in ${formatWait(ms)}`;
