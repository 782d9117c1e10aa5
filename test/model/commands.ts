/**
 * The commands of the money model. Each one sends real requests to the API (or the simulator's controls), checks the
 * answer against the contract right away (typed refusals, the expected refusals of reused keys), and records what it
 * was told in the model for the end-of-sequence checks against the provider's ledger.
 */
import type fc from 'fast-check';
import { chargeWorkflowId } from '../../src/domain/ids';
import type { PaymentView } from '../../src/domain/payment';
import type { ApiResponse } from '../helpers/world';
import { eventually } from '../helpers/eventually';
import { type FaultSpec, describeFault, faultRules } from './faults';
import {
  type ChargeBody,
  type Model,
  type OpRec,
  type PaymentRec,
  accepted,
  assertOneOf,
  assertWellFormed,
  cardOnly,
  describeAnswer,
  fresh,
  paymentOf,
  pick,
  see,
  violation,
} from './model';
import type { MerchantName, SimEffect, World } from './world';

export type Cmd = fc.AsyncCommand<Model, World>;

const AMOUNTS = [1_000, 2_500, 777] as const;
const other = (m: MerchantName): MerchantName => (m === 'a' ? 'b' : 'a');
/** A 503 with a typed error (provider unavailable, Retry-After) refuses a request that never left: repeat it later. */
const REFUSED_FOR_NOW = ['503:provider_unavailable', '503:unavailable'];
export const MOVING = ['200', '202'];
export const OP_ANSWERS = [
  ...MOVING,
  ...REFUSED_FOR_NOW,
  '409:invalid_transition',
  '409:operation_in_flight',
  '422:amount_exceeded',
  '422:provider_rejected',
  // Never sent (breaker open, a cool-down longer than its budget): nothing moved, the key may try again.
  '503:provider_unavailable',
];

/** Sends a charge, records its answer, and records the payment when the API took it on. */
export async function sendCharge(
  m: Model,
  w: World,
  merchant: MerchantName,
  key: string,
  body: ChargeBody,
  label: string,
  second = false,
) {
  const r = await w.api('POST', '/v1/payments', { merchant, key, body, second });
  m.trace.push(`${label} -> ${describeAnswer(r)}`);
  if (r.status >= 200 && r.status < 300) {
    const view = r.body as unknown as PaymentView;
    m.payments.push({ merchant, key, body, view, views: [view] });
  }
  m.seen.push(seenOf(m, 'charge', merchant, key, key, body.amount.value, r));
  return r;
}

/** A card charge of 10.00 EUR, captured at once, for a new order. */
const newOrderCharge = (m: Model): ChargeBody => ({
  orderId: fresh(m, 'order'),
  amount: { value: 1_000, currency: 'EUR' },
  paymentMethod: 'pm_card_visa',
  capture: 'automatic',
});

/** When {@link chargeKillingHolder} kills, and what it does around the kill. */
export interface KillHooks {
  /**
   * Resolves once the moment to kill came (true) or will not come (false: the worker is spared, the trace says so),
   * after the charge was sent. Default: its create reached the provider, where it lingers 1.2 s.
   */
  readonly reached?: (key: string) => Promise<boolean>;
  /** Run once the moment came, before the kill: false spares the worker (the trace says why). */
  readonly beforeKill?: () => Promise<boolean>;
  readonly afterKill?: () => Promise<void>;
}

/**
 * Sends `body` as a charge, SIGKILLs the worker holding the charge at the moment `hooks.reached` names (default: once
 * its create reached the provider, where it lingers 1.2 s: the local first attempt dies with its worker), runs
 * `afterKill`, and checks that the answer still moves money (200 or 202): a create that may have been sent is never
 * `failed`.
 */
export async function chargeKillingHolder(
  m: Model,
  w: World,
  merchant: MerchantName,
  body: ChargeBody,
  label: string,
  { reached, beforeKill = async () => true, afterKill = async () => {} }: KillHooks = {},
): Promise<void> {
  if (reached === undefined) await arm(w, { kind: 'latency', latencyMs: 1_200 }, 'create', body.orderId);
  const key = fresh(m, 'pay');
  const answer = sendCharge(m, w, merchant, key, body, label);
  const moment =
    reached === undefined
      ? eventually(
          `${label}'s create at the provider`,
          () =>
            w.h.sim.ledger(w.h.apiKey).requests.some((r) => r.operation === 'create' && r.reference === body.orderId),
          6_000,
          20,
        ).then(
          () => true,
          () => false,
        )
      : reached(key);
  const killed =
    (await moment) && (await beforeKill())
      ? await w.fleet.killHolder(chargeWorkflowId(w.merchant(merchant).id, key))
      : undefined;
  m.trace.push(`${label}: ${killed === undefined ? 'no worker killed' : `worker ${killed + 1} SIGKILLed`}`);
  await afterKill();
  const r = await answer;
  if (!MOVING.includes(String(r.status)))
    violation(m, `${label}: answered ${describeAnswer(r)}, expected 200 or 202: ${JSON.stringify(r.body)}`);
}

export function seenOf(
  m: Model,
  what: 'charge' | 'capture' | 'refund',
  merchant: MerchantName,
  paymentKey: string,
  key: string,
  amount: number | undefined,
  r: ApiResponse,
) {
  return { step: m.trace.length, what, merchant, paymentKey, key, amount, status: r.status, body: r.body };
}

/** Arms `fault` for one call; answers how to take it off again. */
export async function arm(
  w: World,
  fault: FaultSpec | undefined,
  op: 'create' | 'capture' | 'refund',
  reference: string,
): Promise<() => Promise<void>> {
  if (!fault) return async () => undefined;
  const rules = faultRules(fault, op, reference);
  await w.sim.addFaults(rules);
  return () => w.sim.removeFaults(rules);
}

/**
 * A capture or refund the API refused itself (409, 422 `amount_exceeded`): nothing was sent, so the fault armed for
 * its call must not outlive it. Left armed, `hiddenEffect`'s 404 look-ups hit the payment's other look-ups: a payment
 * waiting for the customer (src/workflows/customer-action.ts) then cannot see the customer completed it, and stays
 * `requires_action` while its 40 rules last (seed 1825762147, path 8:7:4:4:4:4:6:5:5: 45 s after the last command).
 */
export const refusedUnsent = (r: ApiResponse): boolean => r.status >= 400 && r.status < 500 && !accepted(r);

/** A new charge (automatic or manual) of merchant A or B, optionally with a provider fault armed on its create. */
export class Charge implements Cmd {
  constructor(
    readonly merchant: MerchantName,
    readonly capture: 'automatic' | 'manual',
    readonly amountIdx: number,
    readonly decline: boolean,
    readonly fault: FaultSpec | undefined,
  ) {}
  check = () => true;
  async run(m: Model, w: World) {
    const body: ChargeBody = {
      orderId: fresh(m, 'order'),
      amount: { value: AMOUNTS[this.amountIdx % AMOUNTS.length] as number, currency: 'EUR' },
      paymentMethod: this.decline ? 'pm_decline_insufficient_funds' : 'pm_card_visa',
      capture: this.capture,
    };
    await arm(w, this.fault, 'create', body.orderId);
    const r = await sendCharge(m, w, this.merchant, fresh(m, 'pay'), body, this.toString());
    assertOneOf(m, this.toString(), r, MOVING);
  }
  toString = () =>
    `charge(${this.merchant}, ${this.capture}, ${AMOUNTS[this.amountIdx % AMOUNTS.length]}${
      this.decline ? ', decline' : ''
    })${describeFault(this.fault)}`;
}

/** What the customer of a payment that needs them does: completes it, fails the authentication, or nothing. */
export type CustomerAct = 'kept' | 'refused' | 'abandoned';

/**
 * A charge whose payment method needs the customer (`pm_3ds`): 202 `requires_action` with `nextAction`; the customer
 * (a POST to the simulator's authentication page the `nextAction` names) then keeps it, refuses it or abandons it.
 * Whatever it did, the payment must end as the provider holds it (the money invariant: authorized or succeeded with one
 * create effect, or declined with nothing charged and, when abandoned, a cancel at the provider).
 *
 * `refusedCancels`: the provider first refuses that many cancels of the payment (a 400, or a 503 that the cancel's
 * retries see until their budget ends), so the expired wait goes on trying, every 2 s here; `action_expired` only once
 * a cancel took (rule 8). With `npm run fuzz -- --continue-as-new N` the tries go on in the run's continuations.
 */
export class CustomerCharge implements Cmd {
  constructor(
    readonly merchant: MerchantName,
    readonly capture: 'automatic' | 'manual',
    readonly act: CustomerAct,
    readonly refusedCancels: { readonly times: number; readonly status: 400 | 503 } = { times: 0, status: 400 },
  ) {}
  check = () => true;
  async run(m: Model, w: World) {
    const body: ChargeBody = {
      orderId: fresh(m, 'order'),
      amount: { value: 1_500, currency: 'EUR' },
      paymentMethod: 'pm_3ds_required',
      capture: this.capture,
    };
    const { times, status } = this.refusedCancels;
    if (times > 0) {
      // Spent by the cancels of this payment alone (its reference); what is left is cleared before the verdicts.
      await w.sim.addFaults([
        { match: { operation: 'void', reference: body.orderId }, fault: 'status', status, times },
      ]);
    }
    const key = fresh(m, 'pay');
    const r = await sendCharge(m, w, this.merchant, key, body, this.toString());
    assertOneOf(m, this.toString(), r, MOVING);
    const rec = paymentOf(m, this.merchant, key);
    if (rec && times > 0) rec.refusedCancels = this.refusedCancels;
    const view = r.body as unknown as PaymentView;
    // An outage left from an adversary before it (crashDuringCreate's refused connections): nothing reached the
    // provider, and `failed` says so (the money invariant holds the ledger to it: no create of its key).
    if (view.status === 'failed' && view.attempts === 0) {
      m.trace.push(`${this}: failed before the provider (${view.failureReason ?? '?'}), nothing sent`);
      return;
    }
    // Before its timeout nothing but the customer can move it: the first answer waits for them.
    if (view.status !== 'requires_action' || view.nextAction?.type !== 'redirect_to_url') {
      violation(m, `${this}: expected requires_action with a redirect, got ${JSON.stringify(r.body)}`);
      return;
    }
    if (this.act === 'abandoned') return;
    const res = await fetch(view.nextAction.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ result: this.act === 'kept' ? 'succeeded' : 'failed' }),
    });
    m.trace.push(`  customer ${this.act === 'kept' ? 'authenticates' : 'fails'} -> ${res.status}`);
    // 400: the wait already expired and cancelled it (a loaded machine); the invariant holds either way.
    if (res.status !== 200 && res.status !== 400) violation(m, `${this}: the customer's page answered ${res.status}`);
    await res.arrayBuffer();
  }
  toString = () =>
    `customerCharge(${this.merchant}, ${this.capture}, ${this.act}` +
    (this.refusedCancels.times > 0
      ? `, ${this.refusedCancels.times} cancels refused ${this.refusedCancels.status})`
      : ')');
}

/** The other merchant charges the same order reference and amount as an existing payment (issue 8, defect 4). */
export class ChargeSameReference implements Cmd {
  constructor(
    readonly index: number,
    readonly fault: FaultSpec | undefined,
  ) {}
  check = (m: Readonly<Model>) => m.payments.length > 0;
  async run(m: Model, w: World) {
    const p = pick(m, this.index, () => true) as PaymentRec;
    const merchant = other(p.merchant);
    await arm(w, this.fault, 'create', p.body.orderId);
    const label = `${this.toString()} [${merchant} copies ${p.merchant}/${p.key}]`;
    // This merchant's own earlier payments of the order (a copy of a copy comes back to it): one may still be open.
    const own = m.payments
      .filter((x) => x.merchant === merchant && x.body.orderId === p.body.orderId)
      .map((x) => x.key);
    const r = await sendCharge(m, w, merchant, fresh(m, 'pay'), cardOnly(p.body), label);
    // Another merchant's open payment for the same order is none of this merchant's business: no payment_in_flight,
    // unless it names one of this merchant's own payments of the order.
    const named = (r.body.error as { paymentKey?: unknown } | undefined)?.paymentKey;
    const namesOwn = r.status === 409 && own.includes(String(named));
    assertOneOf(m, label, r, namesOwn ? ['409:payment_in_flight'] : MOVING);
  }
  toString = () => `chargeSameReference(#${this.index})${describeFault(this.fault)}`;
}

/**
 * The same merchant charges the same order under a new key. While the first payment is pending, unknown or waits for
 * the customer (before
 * and after this request), the answer must be 409 `payment_in_flight` (issue 8, defect 10); `whileUnknown` first makes
 * a payment whose create is in an outage, so its outcome stays open for seconds.
 */
export class ChargeSameOrder implements Cmd {
  constructor(
    readonly index: number,
    readonly whileUnknown: boolean,
  ) {}
  check = (m: Readonly<Model>) => this.whileUnknown || m.payments.length > 0;
  async run(m: Model, w: World) {
    let p: PaymentRec;
    if (this.whileUnknown) {
      const merchant: MerchantName = this.index % 2 === 0 ? 'a' : 'b';
      const body = newOrderCharge(m);
      await arm(w, { kind: 'outage', latencyMs: 0 }, 'create', body.orderId);
      const first = fresh(m, 'pay');
      const r = await sendCharge(m, w, merchant, first, body, `${this.toString()} first`);
      assertOneOf(m, this.toString(), r, MOVING);
      p = m.payments.at(-1) as PaymentRec;
    } else {
      p = pick(m, this.index, () => true) as PaymentRec;
    }
    const before = await w.api('GET', `/v1/payments/${p.key}`, { merchant: p.merchant });
    const r = await sendCharge(m, w, p.merchant, fresh(m, 'pay'), { ...p.body }, `${this.toString()} [${p.key}]`);
    const after = await w.api('GET', `/v1/payments/${p.key}`, { merchant: p.merchant });
    const open = (v: ApiResponse) => ['pending', 'unknown', 'requires_action'].includes(String(v.body.status));
    if (open(before) && open(after)) {
      assertOneOf(m, `${this} while ${p.key} stayed ${String(after.body.status)}`, r, ['409:payment_in_flight']);
    } else {
      assertOneOf(m, this.toString(), r, [...MOVING, '409:payment_in_flight']);
    }
  }
  toString = () => `chargeSameOrder(#${this.index}${this.whileUnknown ? ', while unknown' : ''})`;
}

/**
 * Two keys for one new order sent at the same instant, one to each of the world's two API processes, while the
 * order's creates linger 1.2 s at the provider (whichever payment takes the order stays open meanwhile): exactly one
 * takes it (200 or 202), the other is 409 `payment_in_flight` naming it, and the end-of-sequence checks find one
 * charge at the provider. Each process's visibility check alone sees neither start: the order claims they share
 * serialize the two (src/client/order-guard.ts).
 */
export class ChargeSameOrderAtOnce implements Cmd {
  constructor(readonly merchant: MerchantName) {}
  check = () => true;
  async run(m: Model, w: World) {
    const body = newOrderCharge(m);
    await arm(w, { kind: 'latency', latencyMs: 1_200 }, 'create', body.orderId);
    const keys = [fresh(m, 'pay'), fresh(m, 'pay')] as const;
    const answers = await Promise.all(
      keys.map((key, i) => sendCharge(m, w, this.merchant, key, body, `${this.toString()} [${key}]`, i === 1)),
    );
    const took = answers.flatMap((r, i) => (r.status >= 200 && r.status < 300 ? [i] : []));
    if (took.length !== 1)
      violation(m, `${this.toString()}: ${took.length} of the two keys took order ${body.orderId}`);
    const winner = took[0] as number;
    const refused = answers[1 - winner] as ApiResponse;
    assertOneOf(m, `${this.toString()} [the other key]`, refused, ['409:payment_in_flight']);
    const named = (refused.body.error as { paymentKey?: unknown } | undefined)?.paymentKey;
    if (named !== keys[winner]) violation(m, `${this.toString()}: the 409 named ${String(named)}, not ${keys[winner]}`);
  }
  toString = () => `chargeSameOrderAtOnce(${this.merchant})`;
}

/** A charge naming a provider nobody configured: 400 naming `provider`, nothing started (issue 8, defect 8). */
export class ChargeUnknownProvider implements Cmd {
  constructor(readonly merchant: MerchantName) {}
  check = () => true;
  async run(m: Model, w: World) {
    const body: ChargeBody = { ...newOrderCharge(m), provider: 'no_such_provider' };
    const r = await w.api('POST', '/v1/payments', { merchant: this.merchant, key: fresh(m, 'pay'), body });
    m.trace.push(`${this.toString()} -> ${describeAnswer(r)}`);
    assertOneOf(m, this.toString(), r, ['400:validation_error']);
    const fields = r.body.error?.fields?.map((f) => f.path) ?? [];
    if (!fields.includes('provider')) violation(m, `${this}: 400 does not name provider: ${JSON.stringify(r.body)}`);
  }
  toString = () => `chargeUnknownProvider(${this.merchant})`;
}

/** The same key and body again: the same payment, no second effect. */
export class RepeatCharge implements Cmd {
  constructor(readonly index: number) {}
  check = (m: Readonly<Model>) => m.payments.length > 0;
  async run(m: Model, w: World) {
    const p = pick(m, this.index, () => true) as PaymentRec;
    const r = await w.api('POST', '/v1/payments', { merchant: p.merchant, key: p.key, body: p.body });
    m.trace.push(`${this} [${p.merchant}/${p.key}] -> ${describeAnswer(r)}`);
    assertOneOf(m, this.toString(), r, MOVING);
    if (r.body.key !== p.key) violation(m, `${this}: answered another payment ${String(r.body.key)}`);
    if (r.headers.get('idempotent-replayed') !== 'true') violation(m, `${this}: no Idempotent-Replayed header`);
    const id = p.view?.providerPaymentId;
    if (id !== undefined && r.body.providerPaymentId !== id)
      violation(m, `${this}: provider payment ${String(r.body.providerPaymentId)}, first answer said ${id}`);
    m.seen.push(seenOf(m, 'charge', p.merchant, p.key, p.key, p.body.amount.value, r));
    see(p, r.body as unknown as PaymentView);
  }
  toString = () => `repeatCharge(#${this.index})`;
}

/** The same key with another amount: 422 `idempotency_key_reused`, no effect. */
export class ReuseChargeKey implements Cmd {
  constructor(readonly index: number) {}
  check = (m: Readonly<Model>) => m.payments.length > 0;
  async run(m: Model, w: World) {
    const p = pick(m, this.index, () => true) as PaymentRec;
    const body = { ...p.body, amount: { value: p.body.amount.value + 1, currency: 'EUR' } };
    const r = await w.api('POST', '/v1/payments', { merchant: p.merchant, key: p.key, body });
    m.trace.push(`${this} [${p.merchant}/${p.key}] -> ${describeAnswer(r)}`);
    assertOneOf(m, this.toString(), r, ['422:idempotency_key_reused']);
  }
  toString = () => `reuseChargeKey(#${this.index})`;
}

const isManual = (p: PaymentRec) => p.body.capture === 'manual' && p.view?.status === 'authorized';
const isCaptured = (p: PaymentRec) => p.view?.status === 'succeeded' && (p.view.amountCaptured ?? 0) > 0;

/** Sends one capture or refund and records it. */
export async function sendOp(
  m: Model,
  w: World,
  p: PaymentRec,
  kind: 'capture' | 'refund',
  key: string,
  body: { amount?: number },
  label: string,
): Promise<ApiResponse> {
  const path = `/v1/payments/${p.key}/${kind === 'capture' ? 'capture' : 'refunds'}`;
  const r = await w.api('POST', path, { merchant: p.merchant, key, body });
  m.trace.push(`${label} -> ${describeAnswer(r)}`);
  assertWellFormed(m, label, r);
  m.seen.push(seenOf(m, kind, p.merchant, p.key, key, body.amount, r));
  if (r.status >= 200 && r.status < 300) see(p, r.body as unknown as PaymentView);
  return r;
}

/**
 * The later of what the model knew and an answer's view: a repeat replays the write's first answer (docs/http-api.md
 * "Repeats"), which may be older than what later writes showed.
 */

/** A capture (full, partial or over the authorization) under a new key, optionally with a fault armed. */
export class Capture implements Cmd {
  constructor(
    readonly index: number,
    readonly mode: 'full' | 'partial' | 'over',
    readonly fraction: number,
    readonly fault: FaultSpec | undefined,
  ) {}
  check = (m: Readonly<Model>) => m.payments.length > 0;
  async run(m: Model, w: World) {
    const p = pick(m, this.index, isManual) as PaymentRec;
    const total = p.body.amount.value;
    const body =
      this.mode === 'full'
        ? {}
        : { amount: this.mode === 'over' ? total + 1 : Math.max(1, Math.floor(total * this.fraction)) };
    const disarm = await arm(w, this.fault, 'capture', p.body.orderId);
    const key = fresh(m, 'cap');
    const r = await sendOp(m, w, p, 'capture', key, body, `${this} [${p.merchant}/${p.key} ${JSON.stringify(body)}]`);
    if (refusedUnsent(r)) await disarm();
    assertOneOf(m, this.toString(), r, OP_ANSWERS);
    m.ops.push({ kind: 'capture', merchant: p.merchant, paymentKey: p.key, key, body, consumed: accepted(r) });
  }
  toString = () =>
    `capture(#${this.index}, ${this.mode}${this.mode === 'partial' ? ` ${this.fraction}` : ''})${describeFault(this.fault)}`;
}

/** A refund (part, all, or more than is refundable) under a new key, optionally with a fault armed. */
export class Refund implements Cmd {
  constructor(
    readonly index: number,
    readonly mode: 'partial' | 'all' | 'over',
    readonly fraction: number,
    readonly fault: FaultSpec | undefined,
  ) {}
  check = (m: Readonly<Model>) => m.payments.length > 0;
  async run(m: Model, w: World) {
    const p = pick(m, this.index, isCaptured) as PaymentRec;
    const left = Math.max(0, (p.view?.amountCaptured ?? 0) - (p.view?.amountRefunded ?? 0));
    const amount =
      this.mode === 'over'
        ? left + 1
        : this.mode === 'all'
          ? Math.max(1, left)
          : Math.max(1, Math.floor(left * this.fraction));
    const disarm = await arm(w, this.fault, 'refund', p.body.orderId);
    const key = fresh(m, 'ref');
    const body = { amount };
    const r = await sendOp(m, w, p, 'refund', key, body, `${this} [${p.merchant}/${p.key} ${amount}]`);
    if (refusedUnsent(r)) await disarm();
    assertOneOf(m, this.toString(), r, OP_ANSWERS);
    m.ops.push({ kind: 'refund', merchant: p.merchant, paymentKey: p.key, key, body, consumed: accepted(r) });
  }
  toString = () =>
    `refund(#${this.index}, ${this.mode}${this.mode === 'partial' ? ` ${this.fraction}` : ''})${describeFault(this.fault)}`;
}

const opTarget = (m: Model, op: OpRec) => m.payments.find((p) => p.merchant === op.merchant && p.key === op.paymentKey);

/** The same capture/refund request again (same key, body, payment): the same answer, no second effect. */
export class RepeatOp implements Cmd {
  constructor(readonly index: number) {}
  check = (m: Readonly<Model>) => m.ops.length > 0;
  async run(m: Model, w: World) {
    const op = m.ops[this.index % m.ops.length] as OpRec;
    const p = opTarget(m, op) as PaymentRec;
    const r = await sendOp(m, w, p, op.kind, op.key, op.body, `${this} [${op.kind} ${op.key}]`);
    assertOneOf(m, this.toString(), r, OP_ANSWERS);
  }
  toString = () => `repeatOp(#${this.index})`;
}

/**
 * A used capture/refund key on another payment of the same merchant, or with another amount: 422
 * `idempotency_key_reused` before any effect (issue 8, defect 2).
 */
export class ReuseOpKey implements Cmd {
  constructor(
    readonly index: number,
    readonly variant: 'otherPayment' | 'otherAmount',
  ) {}
  check = (m: Readonly<Model>) => m.ops.some((o) => o.consumed);
  async run(m: Model, w: World) {
    const used = m.ops.filter((o) => o.consumed);
    const op = used[this.index % used.length] as OpRec;
    const own = opTarget(m, op) as PaymentRec;
    let target: PaymentRec | undefined;
    if (this.variant === 'otherPayment') {
      const others = m.payments.filter((p) => p.merchant === op.merchant && p.key !== op.paymentKey);
      target = others[this.index % Math.max(others.length, 1)];
      if (!target) {
        // A second payment of the same merchant to reuse the key on, in the state the operation needs.
        const body: ChargeBody = {
          ...cardOnly(own.body),
          orderId: fresh(m, 'order'),
          capture: op.kind === 'capture' ? 'manual' : 'automatic',
        };
        const r = await sendCharge(m, w, op.merchant, fresh(m, 'pay'), body, `${this} second payment`);
        assertOneOf(m, this.toString(), r, MOVING);
        target = m.payments.at(-1) as PaymentRec;
      }
    }
    const p = target ?? own;
    const body = target ? op.body : { amount: op.body.amount === undefined ? 1 : op.body.amount + 1 };
    const label = `${this} [${op.kind} ${op.key} on ${p.key} ${JSON.stringify(body)}]`;
    const r = await sendOp(m, w, p, op.kind, op.key, body, label);
    assertOneOf(m, label, r, ['422:idempotency_key_reused']);
  }
  toString = () => `reuseOpKey(#${this.index}, ${this.variant})`;
}

/**
 * Two requests with the same new key and different amounts at once on one payment: one may win, the other is 422
 * `idempotency_key_reused` (issue 8, defect 2: the second answered 200 without a fingerprint check).
 */
export class ConcurrentOp implements Cmd {
  constructor(
    readonly index: number,
    readonly kind: 'capture' | 'refund',
  ) {}
  check = (m: Readonly<Model>) => m.payments.length > 0;
  async run(m: Model, w: World) {
    const p = pick(m, this.index, this.kind === 'capture' ? isManual : isCaptured) as PaymentRec;
    const base =
      this.kind === 'capture' ? p.body.amount.value : (p.view?.amountCaptured ?? 0) - (p.view?.amountRefunded ?? 0);
    const amounts = [Math.max(1, Math.floor(base * 0.3)), Math.max(2, Math.floor(base * 0.6))];
    const key = fresh(m, this.kind === 'capture' ? 'cap' : 'ref');
    const label = `${this} [${p.merchant}/${p.key} ${key} ${amounts.join(' vs ')}]`;
    const answers = await Promise.all(
      amounts.map((amount) => sendOp(m, w, p, this.kind, key, { amount }, `${label} amount ${amount}`)),
    );
    answers.forEach((r) => assertOneOf(m, label, r, [...OP_ANSWERS, '422:idempotency_key_reused']));
    const winners = answers.flatMap((r, i) => (accepted(r) ? [i] : []));
    if (winners.length > 1)
      violation(m, `${label}: both requests were taken on: ${answers.map(describeAnswer).join(' / ')}`);
    const winner = winners[0];
    if (winner !== undefined) {
      const loser = answers[1 - winner] as ApiResponse;
      assertOneOf(m, `${label} (the loser)`, loser, ['422:idempotency_key_reused']);
    }
    m.ops.push({
      kind: this.kind,
      merchant: p.merchant,
      paymentKey: p.key,
      key,
      body: { amount: amounts[winner ?? 0] as number },
      consumed: winner !== undefined,
    });
  }
  toString = () => `concurrent${this.kind === 'capture' ? 'Capture' : 'Refund'}(#${this.index})`;
}

/**
 * What an operator says: `truth` from the provider's records; `lie` claims another merchant's provider payment for a
 * create under review; `mistaken` says a capture or refund under review succeeded (naming this payment's provider
 * payment) whatever the provider shows: the payment must still end with the provider's amounts (issue 19, defect 3).
 */
export type ResolveMode = 'truth' | 'lie' | 'mistaken';

/**
 * An operator's verdict on a payment in needs_review (or a refused resolve of a payment that is not). `race`: the
 * verdict goes in the moment the payment shows needs_review, while held webhooks are delivered (issue 19: resolves
 * racing webhooks and reconciles).
 */
export class OperatorResolve implements Cmd {
  constructor(
    readonly index: number,
    readonly mode: ResolveMode,
    readonly race = false,
  ) {}
  check = (m: Readonly<Model>) => m.payments.length > 0;
  async run(m: Model, w: World) {
    const open = ['needs_review', 'unknown', 'pending'];
    const p = pick(m, this.index, (x) => open.includes(x.view?.status ?? '') || reviewing(x.view)) as PaymentRec;
    // An operator looks at a payment once it shows up in review: wait (bounded) while its outcome is still open.
    const deadline = Date.now() + 15_000;
    while (Date.now() < deadline) {
      const r = await w.api('GET', `/v1/payments/${p.key}`, { merchant: p.merchant });
      if (r.body.status !== 'pending' && r.body.status !== 'unknown') break;
      // Racing: the verdict goes in the moment the reconcile gave up, not a quarter of a second later.
      await new Promise((resolve) => setTimeout(resolve, this.race ? 50 : 250));
    }
    const resolving = operatorResolve(m, w, p, this.mode, this.toString());
    const [outcome] = await Promise.all([resolving, this.race ? w.sim.flushWebhooks() : undefined]);
    if (outcome === 'resolved_lie')
      violation(m, `${this}: a provider payment id was taken without a check at the provider (defect 5)`);
  }
  toString = () =>
    `operatorResolve(#${this.index}${this.mode === 'truth' ? '' : `, ${this.mode}`}${this.race ? ', racing webhooks' : ''})`;
}

const reviewing = (v: PaymentView | undefined) => v?.operations?.some((o) => o.state === 'needs_review') ?? false;

/**
 * What an operator decides from the provider's records: the create happened iff the ledger has its effect; a capture
 * or refund under review happened iff the ledger has an effect under its key (not "the provider's total is above the
 * view's": a webhook may already have shown it). `lie` and `mistaken` as {@link ResolveMode} says. The payment checks
 * every verdict with a look-up of its own: while faults may be armed on look-ups (`lookupsMayFail`), a truthful verdict
 * it cannot confirm may be refused (422 `provider_disagrees`, 503); without them it must be taken. Answers what
 * happened to the resolve.
 */
/** A 503 `provider_unavailable`: the provider could not be asked; the same request after its Retry-After. */
const providerUnavailable = (r: ApiResponse) => r.status === 503 && r.body.error?.type === 'provider_unavailable';

export async function operatorResolve(
  m: Model,
  w: World,
  p: PaymentRec,
  mode: ResolveMode,
  label: string,
  lookupsMayFail = true,
): Promise<'resolved' | 'resolved_lie' | 'refused' | 'not_in_review'> {
  const viewAnswer = await w.api('GET', `/v1/payments/${p.key}`, { merchant: p.merchant });
  const view = viewAnswer.body as unknown as PaymentView;
  if (viewAnswer.status === 200) see(p, view);
  const inReview = view.status === 'needs_review';
  let body: { outcome: 'succeeded' | 'failed'; providerPaymentId?: string; note: string };
  let lied = false;
  if (!inReview) {
    body = { outcome: 'failed', note: 'model: not in review' };
  } else if (view.providerPaymentId === undefined) {
    const effects = await w.sim.effects();
    const created = effects.find(
      (e) => e.operation === 'create' && e.idempotency_key === w.providerKey(p.merchant, 'create', p.key),
    );
    const foreign = effects.find((e) => e.operation === 'create' && e.reference !== p.body.orderId);
    if (mode === 'lie' && foreign) {
      body = { outcome: 'succeeded', providerPaymentId: foreign.payment_id, note: 'model: wrong id' };
      lied = true;
    } else {
      body = created
        ? { outcome: 'succeeded', providerPaymentId: created.payment_id, note: 'model: found at provider' }
        : { outcome: 'failed', note: 'model: no effect at provider' };
    }
  } else {
    // The ledger, not the provider API: faults still armed on lookups must not mislead the operator.
    const effects = await w.sim.effects();
    const op = view.operations?.find((o) => o.state === 'needs_review');
    const reviewed = op?.kind ?? reasonKind(view);
    const at = providerTotals(effects, view.providerPaymentId, p.body.capture === 'automatic');
    const happened =
      op && op.kind !== 'void'
        ? effects.some((e) => e.idempotency_key === w.providerKey(p.merchant, op.kind, op.key))
        : (reviewed === 'capture' && at.captured > view.amountCaptured) ||
          (reviewed === 'refund' && at.refunded > view.amountRefunded) ||
          (reviewed === 'void' && at.voided);
    body =
      mode === 'mistaken' && reviewed !== 'void'
        ? { outcome: 'succeeded', providerPaymentId: view.providerPaymentId, note: 'model: mistaken, did not look' }
        : { outcome: happened ? 'succeeded' : 'failed', note: `model: ${reviewed ?? '?'} at provider` };
  }
  let r = await w.operatorResolve(p.merchant, p.key, body);
  m.trace.push(`${label} [${p.merchant}/${p.key} ${view.status} -> ${JSON.stringify(body)}] -> ${describeAnswer(r)}`);
  // An operator who may not be told "no" (the final pass) does what a 503 provider_unavailable asks: sends the same
  // verdict again after its Retry-After (a cool-down or an open breaker outlives the faults), for at most a minute.
  for (const until = Date.now() + 60_000; !lookupsMayFail && providerUnavailable(r) && Date.now() < until;) {
    await new Promise((resolve) => setTimeout(resolve, Number(r.headers.get('retry-after') ?? '1') * 1_000));
    r = await w.operatorResolve(p.merchant, p.key, body);
    m.trace.push(`${label} again after Retry-After -> ${describeAnswer(r)}`);
  }
  const unconfirmed = r.status === 503 || (r.status === 422 && r.body.error?.type === 'provider_disagrees');
  if (inReview && mode === 'truth' && lookupsMayFail && unconfirmed) return 'refused';
  assertWellFormed(m, label, r);
  if (r.status === 200) {
    if (!inReview) violation(m, `${label}: resolve of a ${view.status} payment was accepted`);
    see(p, r.body as unknown as PaymentView);
    return lied ? 'resolved_lie' : 'resolved';
  }
  if (!inReview) assertOneOf(m, label, r, ['409:invalid_transition']);
  if (inReview && mode === 'truth') violation(m, `${label}: a truthful resolve was refused: ${JSON.stringify(r.body)}`);
  return inReview ? 'refused' : 'not_in_review';
}

/** A provider payment's totals from the ledger's effects on it. */
export function providerTotals(effects: readonly SimEffect[], paymentId: string, automatic: boolean) {
  const on = effects.filter((e) => e.payment_id === paymentId);
  const sum = (op: SimEffect['operation']) => on.filter((e) => e.operation === op).reduce((n, e) => n + e.amount, 0);
  // An automatic capture is part of the create; a manual one is its own effect.
  return {
    captured: automatic ? sum('create') : sum('capture'),
    refunded: sum('refund'),
    voided: on.some((e) => e.operation === 'void'),
  };
}

const reasonKind = (v: PaymentView): 'capture' | 'refund' | 'void' | undefined => {
  const reason = v.review?.reason ?? '';
  if (reason.startsWith('capture')) return 'capture';
  if (reason.startsWith('refund')) return 'refund';
  if (reason.startsWith('void')) return 'void';
  return undefined;
};

/** A merchant token on the operator's resolve: 401/403, never the handler (issue 8, defect 5). */
export class MerchantResolve implements Cmd {
  constructor(readonly index: number) {}
  check = (m: Readonly<Model>) => m.payments.length > 0;
  async run(m: Model, w: World) {
    const p = pick(m, this.index, () => true) as PaymentRec;
    const merchantId = w.merchant(p.merchant).id;
    const r = await w.api('POST', `/v1/payments/${p.key}/resolve?merchantId=${merchantId}`, {
      merchant: p.merchant,
      body: { outcome: 'failed', note: 'model: a merchant tries' },
    });
    m.trace.push(`${this} [${p.merchant}/${p.key}] -> ${describeAnswer(r)}`);
    assertOneOf(m, this.toString(), r, ['401:unauthorized', '403:forbidden']);
  }
  toString = () => `merchantResolve(#${this.index})`;
}

/**
 * Duplicated and/or reordered webhooks from now on (simulator merchant settings), or none at all (a lost webhook is
 * the provider's right: nothing may depend on one arriving).
 */
export class WebhookMode implements Cmd {
  constructor(readonly mode: 'plain' | 'duplicate' | 'reorder' | 'duplicate+reorder' | 'off') {}
  check = () => true;
  async run(m: Model, w: World) {
    await w.sim.setWebhooks({
      deliver: this.mode !== 'off',
      duplicate: this.mode.includes('duplicate'),
      reorder: this.mode.includes('reorder'),
    });
    m.trace.push(this.toString());
  }
  toString = () => `webhooks(${this.mode})`;
}

/** Releases held webhooks and waits for every delivery. */
export class FlushWebhooks implements Cmd {
  check = () => true;
  async run(m: Model, w: World) {
    await w.sim.flushWebhooks();
    m.trace.push(this.toString());
  }
  toString = () => 'flushWebhooks';
}
