/**
 * The money invariant, one checker for every harness that reads the provider's ledger (the model test, the soak, the
 * bench, the end-to-end tests). Pure: from what was asked and answered, the views read, and the simulator's ledger
 * (`GET /_sim/ledger`, filtered to the harness's api key), it lists every broken promise:
 *  1. one effect per provider key (operation + idempotency key): no double effect, no provider payment moved beyond
 *     itself (captured > authorized, refunded > captured);
 *  2. no payment is answered or shown `failed` or `declined`, nor fails over, while the provider holds a create under
 *     its key;
 *  3. once settled, a view's amounts (authorized, captured, refunded), status and provider payment are the provider's,
 *     and each of its captures and refunds is `succeeded` exactly when the provider has its effect;
 *  4. a 200 charge, capture or refund matches its ledger effect (amount, provider payment); a key every answer refused
 *     has none (a 5xx but `provider_unavailable` is no answer, not a refusal: "repeat");
 *  5. a key that was answered once replays its own answer: never a refusal (e.g. 409 `payment_in_flight`) after a 2xx;
 *  6. a capture or refund the provider never received (no request under its key) is never in review as an unknown
 *     outcome: it provably never left;
 *  7. nothing stays pending, unknown, requires_action or running; a review names its reason;
 *  8. a payment that waited for the customer and ended declined names its provider payment, which the provider never
 *     charged: `action_expired` only once that payment was cancelled (a void of it), `authentication_failed` without.
 */
import { providerIdempotencyKey } from '../src/activities/keys';
import type { LedgerEffect, LedgerRequest } from '../src/simulator/server';

/** The fields of a ledger effect the invariant reads. */
export type InvariantEffect = Pick<
  LedgerEffect,
  'operation' | 'idempotency_key' | 'reference' | 'payment_id' | 'amount'
>;

/** What a problem counts as in a verdict (the soak's `D double effects, S stuck, M mismatches`). */
export type MoneyProblemKind = 'double' | 'stuck' | 'mismatch';

/** One broken promise, with the rule's number in its message. */
export interface MoneyProblem {
  readonly kind: MoneyProblemKind;
  readonly message: string;
}

/** The parts of a PaymentView the invariant reads. */
export interface InvariantView {
  readonly status: string;
  readonly amountAuthorized: number;
  readonly amountCaptured: number;
  readonly amountRefunded: number;
  readonly providerPaymentId?: string;
  readonly failureReason?: string;
  readonly declineCode?: string;
  readonly review?: { readonly reason: string };
  readonly failovers?: readonly unknown[];
  readonly operations?: readonly {
    readonly kind: string;
    readonly key: string;
    readonly state: string;
    readonly reason?: string;
  }[];
}

/** One payment a harness drove. */
export interface InvariantPayment {
  readonly merchantId: string;
  readonly key: string;
  readonly capture: 'automatic' | 'manual';
  /**
   * Its view once the harness waited for quiescence, or why it could not be read (stuck). Absent: not read (a charge
   * refused with a 4xx has none; a bench that only reads answers skips rules 3 and 7).
   */
  readonly final?: InvariantView | { readonly error: string };
  /** Views read before (e.g. before an operator resolved a review): rules 2 and 6 hold for each of them too. */
  readonly earlier?: readonly InvariantView[];
}

/** One HTTP answer a harness got, in the order it got them. */
export interface InvariantAnswer {
  readonly merchantId: string;
  readonly paymentKey: string;
  readonly kind: 'charge' | 'capture' | 'refund';
  /** The capture's or refund's own key; the payment key for a charge. */
  readonly opKey: string;
  /** What was asked: the charge's amount, the capture's (undefined: all that is authorized), the refund's. */
  readonly amount: number | undefined;
  readonly status: number;
  /** A PaymentView body's fields (a 2xx). */
  readonly bodyStatus?: string;
  readonly amountAuthorized?: number;
  readonly providerPaymentId?: string;
  readonly failedOver?: boolean;
  /** An error body's `error.type` (and the open payment a 409 `payment_in_flight` names). */
  readonly errorType?: string;
  readonly namedKey?: string;
}

/** What the invariant is held against. */
export interface InvariantInput {
  readonly payments: readonly InvariantPayment[];
  readonly answers: readonly InvariantAnswer[];
  /** The ledger of the harness's api key; without `requests` rule 6 is not checked. */
  readonly ledger: {
    readonly effects: readonly InvariantEffect[];
    readonly requests?: readonly Pick<LedgerRequest, 'idempotency_key'>[];
  };
  /**
   * True where an operator resolved every review before the final read (the model test): a final `needs_review` is
   * stuck. Otherwise a payment in review may not know yet what the provider did, so rule 3 skips it.
   */
  readonly reviewsResolved?: boolean;
}

/** Builds an {@link InvariantAnswer} from a decoded answer body. */
export function invariantAnswer(
  what: Pick<InvariantAnswer, 'merchantId' | 'paymentKey' | 'kind' | 'opKey' | 'amount' | 'status'>,
  body: Record<string, unknown> | undefined,
): InvariantAnswer {
  const error = body?.error as { type?: unknown } | undefined;
  const str = (v: unknown) => (typeof v === 'string' ? v : undefined);
  const fields = {
    bodyStatus: str(body?.status),
    amountAuthorized: typeof body?.amountAuthorized === 'number' ? body.amountAuthorized : undefined,
    providerPaymentId: str(body?.providerPaymentId),
    failedOver: Array.isArray(body?.failovers) && body.failovers.length > 0 ? true : undefined,
    errorType: str(error?.type),
    namedKey: str(body?.paymentKey),
  };
  return {
    ...what,
    ...Object.fromEntries(Object.entries(fields).filter(([, v]) => v !== undefined)),
  } as InvariantAnswer;
}

const OPEN = new Set(['pending', 'unknown', 'requires_action']);
const isView = (v: InvariantPayment['final']): v is InvariantView => v !== undefined && !('error' in v);
const is2xx = (status: number) => status >= 200 && status < 300;

/** Everything the provider did to one payment: its create (under the payment's key) and the effects on it. */
interface ProviderSide {
  readonly create: InvariantEffect | undefined;
  readonly authorized: number;
  readonly captured: number;
  readonly refunded: number;
  readonly voided: boolean;
}

/** Checks the invariant; answers every problem found (empty: it holds). */
export function checkMoneyInvariant(input: InvariantInput): MoneyProblem[] {
  const problems: MoneyProblem[] = [];
  const add = (kind: MoneyProblemKind, message: string) => problems.push({ kind, message });
  const { effects } = input.ledger;
  const pk = (merchantId: string, op: 'create' | 'capture' | 'refund', key: string) =>
    providerIdempotencyKey(merchantId, op, key);

  // 1. One effect per provider key.
  const byKey = new Map<string, InvariantEffect[]>();
  for (const e of effects) {
    if (e.idempotency_key === null) continue;
    const k = `${e.operation} ${e.idempotency_key}`;
    byKey.set(k, [...(byKey.get(k) ?? []), e]);
  }
  for (const [k, list] of byKey) {
    for (let i = 1; i < list.length; i++)
      add('double', `1: ${list.length} effects under one key (${k}): ${JSON.stringify(list.map(brief))}`);
  }
  const effectsOf = (op: string, providerKey: string) => byKey.get(`${op} ${providerKey}`) ?? [];
  const onPayment = new Map<string, InvariantEffect[]>();
  for (const e of effects) onPayment.set(e.payment_id, [...(onPayment.get(e.payment_id) ?? []), e]);

  const sideOf = (p: Pick<InvariantPayment, 'merchantId' | 'key' | 'capture'>): ProviderSide => {
    const create = effectsOf('create', pk(p.merchantId, 'create', p.key))[0];
    const on = create ? (onPayment.get(create.payment_id) ?? []) : [];
    const sum = (op: string) => on.filter((e) => e.operation === op).reduce((n, e) => n + e.amount, 0);
    const authorized = create?.amount ?? 0;
    return {
      create,
      authorized,
      // An automatic capture is part of the create; a manual one is its own effect.
      captured: p.capture === 'automatic' ? authorized + sum('capture') : sum('capture'),
      refunded: sum('refund'),
      voided: on.some((e) => e.operation === 'void'),
    };
  };

  const payments = new Map(input.payments.map((p) => [`${p.merchantId}/${p.key}`, p]));
  for (const p of input.payments) {
    const name = `${p.merchantId}/${p.key}`;
    const side = sideOf(p);
    if (side.captured > side.authorized)
      add('double', `1: ${name}: the provider captured ${side.captured} > authorized ${side.authorized}`);
    if (side.refunded > side.captured)
      add('double', `1: ${name}: the provider refunded ${side.refunded} > captured ${side.captured}`);

    const views = [...(p.earlier ?? []), ...(isView(p.final) ? [p.final] : [])];
    const told = new Set<string>();
    const once = (kind: MoneyProblemKind, message: string) => {
      if (told.has(message)) return;
      told.add(message);
      add(kind, message);
    };
    for (const v of views) {
      // 2. Never failed, declined or failed over while the provider holds the create.
      if (side.create && (v.status === 'failed' || v.status === 'declined'))
        once(
          'mismatch',
          `2: ${name} shows ${v.status}${v.failureReason ? ` (${v.failureReason})` : ''} while the provider holds its create ${side.create.payment_id}`,
        );
      if (side.create && (v.failovers?.length ?? 0) > 0)
        once('mismatch', `2: ${name} failed over while the provider holds its create ${side.create.payment_id}`);
      // 6. A capture or refund that never reached the provider is not an unknown outcome.
      if (input.ledger.requests) {
        for (const o of v.operations ?? []) {
          if (o.state !== 'needs_review' || (o.kind !== 'capture' && o.kind !== 'refund')) continue;
          const key = pk(p.merchantId, o.kind, o.key);
          if (!input.ledger.requests.some((r) => r.idempotency_key === key))
            once(
              'mismatch',
              `6: ${name}: ${o.kind} ${o.key} never reached the provider (no request under its key), yet it is in review as an unknown outcome${o.reason ? ` (${o.reason})` : ''}`,
            );
        }
      }
    }

    // 7. Nothing left open; 3. the settled view is the provider's.
    const final = p.final;
    if (final === undefined) continue;
    if (!isView(final)) {
      add('stuck', `7: ${name}: no final view (${final.error})`);
      continue;
    }
    const running = (final.operations ?? []).filter((o) => o.state === 'running');
    if (OPEN.has(final.status) || running.length > 0) {
      add('stuck', `7: ${name} stays ${final.status}${running.map((o) => `, ${o.kind} ${o.key} running`).join('')}`);
      continue;
    }
    const reviewOps = (final.operations ?? []).filter((o) => o.state === 'needs_review');
    for (const o of reviewOps) if (!o.reason) add('stuck', `7: ${name}: ${o.kind} ${o.key} in review without a reason`);
    if (final.status === 'needs_review') {
      if (input.reviewsResolved) add('stuck', `7: ${name} stays needs_review after every review was resolved`);
      else if (!final.review?.reason) add('stuck', `7: ${name}: needs_review without a reason`);
      continue;
    }
    // A failed or declined payment the provider holds: rule 2 told it already, rule 3 would only repeat it.
    if (side.create && (final.status === 'failed' || final.status === 'declined')) continue;
    if (endedWaitingForCustomer(final)) {
      checkCustomerEnd(name, final, onPayment.get(final.providerPaymentId ?? '') ?? [], add);
      continue;
    }
    checkSettled(p, name, final, side, add, (op, key) => effectsOf(op, pk(p.merchantId, op, key)));
  }

  checkAnswers(input.answers, payments, sideOf, (m, op, key) => effectsOf(op, pk(m, op, key)), add);
  return problems;
}

/** Declined after waiting for the customer: the provider payment it names never charged anything. */
const endedWaitingForCustomer = (v: InvariantView): boolean =>
  v.status === 'declined' && (v.declineCode === 'action_expired' || v.declineCode === 'authentication_failed');

/** Rule 8: a payment declined after it waited for the customer moved nothing, and an expired one was cancelled. */
function checkCustomerEnd(
  name: string,
  view: InvariantView,
  effects: readonly InvariantEffect[],
  add: (kind: MoneyProblemKind, message: string) => void,
): void {
  if (view.providerPaymentId === undefined)
    add('mismatch', `8: ${name} is declined ${view.declineCode} but names no provider payment`);
  if (view.amountAuthorized !== 0 || view.amountCaptured !== 0 || view.amountRefunded !== 0)
    add('mismatch', `8: ${name} is declined ${view.declineCode} but shows money: ${JSON.stringify(view)}`);
  const moved = effects.filter((e) => e.operation !== 'void' || e.amount > 0);
  if (moved.length > 0)
    add(
      'mismatch',
      `8: ${name} is declined ${view.declineCode}, yet the provider moved ${JSON.stringify(moved.map(brief))}`,
    );
  const cancelled = effects.some((e) => e.operation === 'void');
  if (view.declineCode === 'action_expired' && !cancelled)
    add('mismatch', `8: ${name} expired waiting for the customer, but its provider payment was never cancelled`);
}

/** Rule 3: a settled view equals the provider's payment. */
function checkSettled(
  p: InvariantPayment,
  name: string,
  view: InvariantView,
  side: ProviderSide,
  add: (kind: MoneyProblemKind, message: string) => void,
  own: (op: 'capture' | 'refund', key: string) => InvariantEffect[],
): void {
  const got = { authorized: view.amountAuthorized, captured: view.amountCaptured, refunded: view.amountRefunded };
  const want = side.create
    ? { authorized: side.authorized, captured: side.captured, refunded: side.refunded }
    : { authorized: 0, captured: 0, refunded: 0 };
  if (got.authorized !== want.authorized || got.captured !== want.captured || got.refunded !== want.refunded)
    add(
      'mismatch',
      `3: ${name} (${view.status}): view ${JSON.stringify(got)} but the provider ${JSON.stringify(want)}`,
    );
  const status = !side.create
    ? ['declined', 'failed']
    : side.voided
      ? ['voided']
      : side.captured > 0
        ? ['succeeded']
        : ['authorized'];
  if (!status.includes(view.status))
    add('mismatch', `3: ${name} is ${view.status}, but the provider's payment says ${status.join(' or ')}`);
  if (side.create && view.providerPaymentId !== side.create.payment_id)
    add(
      'mismatch',
      `3: ${name} names provider payment ${String(view.providerPaymentId)}, but its create made ${side.create.payment_id}`,
    );
  if (!side.create && view.providerPaymentId !== undefined)
    add(
      'mismatch',
      `3: ${name} names provider payment ${view.providerPaymentId}, but the provider has no create for it`,
    );
  for (const o of view.operations ?? []) {
    if (o.kind !== 'capture' && o.kind !== 'refund') continue;
    const has = own(o.kind, o.key).length > 0;
    if (o.state === 'succeeded' && !has)
      add('mismatch', `3: ${name}: ${o.kind} ${o.key} is succeeded, but the provider has no ${o.kind} under its key`);
    if ((o.state === 'rejected' || o.state === 'failed') && has)
      add('mismatch', `3: ${name}: ${o.kind} ${o.key} is ${o.state}, but the provider did it`);
  }
}

/** Rules 2, 4 and 5 on the answers. */
function checkAnswers(
  answers: readonly InvariantAnswer[],
  payments: ReadonlyMap<string, InvariantPayment>,
  sideOf: (p: Pick<InvariantPayment, 'merchantId' | 'key' | 'capture'>) => ProviderSide,
  own: (merchantId: string, op: 'create' | 'capture' | 'refund', key: string) => InvariantEffect[],
  add: (kind: MoneyProblemKind, message: string) => void,
): void {
  // Keys an answer took on (a 2xx), or left open: a 5xx other than `provider_unavailable` (which promises nothing left)
  // is no answer at all ("repeat": Temporal or the API could not say in time), so it never counts as a refusal.
  const taken = new Set<string>();
  for (const a of answers) if (is2xx(a.status) || noAnswer(a)) taken.add(`${a.merchantId}/${a.kind}/${a.opKey}`);
  const answered = new Map<string, number>();
  for (const a of answers) {
    const p = payments.get(`${a.merchantId}/${a.paymentKey}`);
    const label = `${a.merchantId}/${a.paymentKey}: ${a.kind} ${a.opKey} answered ${a.status} ${a.bodyStatus ?? a.errorType ?? ''}`;
    const id = `${a.merchantId}/${a.kind}/${a.opKey}`;
    // 5. A key answered once replays its own answer: after a 200 no refusal, after a 202 only its own outcome (a
    // provider's refusal), never another payment's 409. A different body (422 reused) is another request.
    const before = answered.get(id);
    if (before !== undefined && !is2xx(a.status) && !noAnswer(a) && a.errorType !== 'idempotency_key_reused') {
      if (before === 200 || a.errorType === 'payment_in_flight')
        add('mismatch', `5: ${label}${a.namedKey ? ` naming ${a.namedKey}` : ''}, after a ${before} for the same key`);
    }
    if (is2xx(a.status) && before !== 200) answered.set(id, a.status);
    if (a.kind === 'charge') {
      const side = sideOf({ merchantId: a.merchantId, key: a.opKey, capture: p?.capture ?? 'automatic' });
      const create = side.create;
      if (is2xx(a.status) && create && (a.bodyStatus === 'failed' || a.bodyStatus === 'declined'))
        add('mismatch', `2: ${label} while the provider holds its create ${create.payment_id}`);
      if (is2xx(a.status) && create && a.failedOver)
        add('mismatch', `2: ${label}: failed over while the provider holds its create ${create.payment_id}`);
      if (a.status === 200 && (a.bodyStatus === 'authorized' || a.bodyStatus === 'succeeded')) {
        if (!create) add('mismatch', `4: ${label}, but the provider has no create under its key`);
        else if (a.amountAuthorized !== undefined && a.amountAuthorized !== create.amount)
          add('mismatch', `4: ${label} for ${a.amountAuthorized}, but the provider's create is ${create.amount}`);
        else if (a.providerPaymentId !== undefined && a.providerPaymentId !== create.payment_id)
          add('mismatch', `4: ${label} naming ${a.providerPaymentId}, but its create made ${create.payment_id}`);
      }
      if (!is2xx(a.status) && !taken.has(id) && create)
        add('mismatch', `4: ${label}, every answer refused it, yet the provider has its create`);
      continue;
    }
    const effects = own(a.merchantId, a.kind, a.opKey);
    if (a.status === 200) {
      const side = p ? sideOf(p) : undefined;
      const expected = a.amount ?? (a.kind === 'capture' ? side?.authorized : undefined);
      const effect = effects[0];
      if (!effect) add('mismatch', `4: ${label}, but the provider has no ${a.kind} under its key`);
      else if (expected !== undefined && effect.amount !== expected)
        add('mismatch', `4: ${label} for ${expected}, but the provider's ${a.kind} is ${effect.amount}`);
      else if (side?.create && effect.payment_id !== side.create.payment_id)
        add('mismatch', `4: ${label}, but the provider moved payment ${effect.payment_id}, not this one`);
    }
    if (effects.length > 0 && a.status === 422 && a.errorType === 'provider_rejected')
      add('mismatch', `4: ${label}, yet the provider did it`);
    else if (effects.length > 0 && !is2xx(a.status) && !taken.has(id))
      add('mismatch', `4: ${label}, every answer refused it, yet the provider did it`);
  }
}

/** A 5xx that is not a refusal: `unavailable`, `internal_error`, a dropped answer (the caller repeats). */
const noAnswer = (a: { readonly status: number; readonly errorType?: string }): boolean =>
  a.status >= 500 && a.errorType !== 'provider_unavailable';

const brief = (e: InvariantEffect) => ({ op: e.operation, payment: e.payment_id, amount: e.amount, ref: e.reference });
