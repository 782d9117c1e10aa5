/**
 * The model's adversaries of issue 19, the interleavings that found its defects: a rolling deploy (two workers with
 * different `PROVIDER_*` settings on the same queues), a worker SIGKILLed during a charge's local first create attempt,
 * a provider outage longer than every retry budget, a Retry-After longer than every budget, and a repeat of a settled
 * key while another key of its order is open. Each records what it did in the trace; the end-of-sequence invariant
 * (bench/money-invariant.ts) judges the money.
 */
import { type Cmd, MOVING, OP_ANSWERS, arm, chargeKillingHolder, sendCharge, sendOp, seenOf } from './commands';
import {
  type ChargeBody,
  type Model,
  type PaymentRec,
  accepted,
  assertOneOf,
  describeAnswer,
  fresh,
  pick,
  see,
  violation,
} from './model';
import type { PaymentView } from '../../src/domain/payment';
import type { MerchantName, OutageKind, World } from './world';

/** Longer than every retry budget of the model's workers (6 s per write, 10 s per look-up; world.ts). */
export const OUTAGE_MS = 12_000;
/**
 * A crashed worker's workflow task is handed out again after its 10 s start-to-close timeout: an outage that starts
 * with the crash must outlast that and the create's budget after it.
 */
export const CRASH_OUTAGE_MS = 20_000;
/** The model's "minutes": longer than every write budget (6 s), as 5 minutes is for production's 2-minute budgets. */
export const LONG_RETRY_AFTER_S = 20;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The provider is taken away again: an operation sent during an earlier outage may now meet this one too. */
const providerDisturbed = (m: Model): void => {
  for (const op of m.ops) delete op.settlesWithoutOperator;
};

const newCharge = (m: Model, capture: 'automatic' | 'manual' = 'manual'): ChargeBody => ({
  orderId: fresh(m, 'order'),
  amount: { value: 1_000, currency: 'EUR' },
  paymentMethod: 'pm_card_visa',
  capture,
});

/** One step of a rolling deploy: a worker restarts with the other provider configuration, beside the one that did not. */
export class RollingDeploy implements Cmd {
  constructor(readonly slot: 0 | 1) {}
  check = () => true;
  async run(m: Model, w: World) {
    const before = w.fleet.describe();
    const profile = before.split(',')[this.slot] === 'A' ? 'B' : 'A';
    await w.fleet.deploy(this.slot, profile);
    m.trace.push(`${this} [workers ${before} -> ${w.fleet.describe()}]`);
  }
  toString = () => `rollingDeploy(worker ${this.slot + 1})`;
}

/**
 * A charge whose local first create attempt is at the provider when its worker is SIGKILLed (the provider holds the
 * request 1.2 s and commits it anyway), then `then`: the provider refuses connections for {@link CRASH_OUTAGE_MS}, or
 * another payment's 429 with a long Retry-After sets the fleet's cool-down, or nothing. Every later attempt of the
 * charge is then refused before it leaves, yet the provider holds the first one (issue 19, defect 2).
 */
export class CrashDuringCreate implements Cmd {
  constructor(
    readonly merchant: MerchantName,
    readonly then: 'refused' | 'coolDown' | 'none',
  ) {}
  check = () => true;
  async run(m: Model, w: World) {
    if (this.then !== 'none') providerDisturbed(m);
    const body = newCharge(m);
    const label = this.toString();
    await chargeKillingHolder(m, w, this.merchant, body, label, {
      afterKill: async () => {
        if (this.then === 'refused') await w.outage('refused', CRASH_OUTAGE_MS);
        if (this.then === 'coolDown') await setCoolDown(m, w, this.merchant, `${label} cool-down`);
      },
    });
  }
  toString = () => `crashDuringCreate(${this.merchant}, then ${this.then})`;
}

/** A new charge whose create the provider answers 429 with a Retry-After longer than every budget. */
async function setCoolDown(m: Model, w: World, merchant: MerchantName, label: string): Promise<void> {
  const body = newCharge(m, 'automatic');
  await w.sim.addFaults([
    {
      match: { operation: 'create', reference: body.orderId },
      fault: 'status',
      status: 429,
      retry_after_s: LONG_RETRY_AFTER_S,
      times: 1,
    },
  ]);
  const r = await sendCharge(m, w, merchant, fresh(m, 'pay'), body, label);
  if (!MOVING.includes(String(r.status))) violation(m, `${label}: answered ${describeAnswer(r)}`);
}

/**
 * The provider goes down for longer than every retry budget (refused connections, or 503 to everything), then back.
 * `then`: a capture (of a new manual payment authorized just before) or a refund (of a new automatic one) sent during
 * the outage, whose every attempt the provider refuses or never sees: never an unknown outcome left to an operator once
 * the provider is back (its reconcile resends it with the same key), never in review without a request under its key
 * (rule 6). The 1,000-payment soak's capture 289 was both.
 */
export class ProviderOutage implements Cmd {
  constructor(
    readonly kind: OutageKind,
    readonly merchant: MerchantName = 'a',
    readonly then: 'capture' | 'refund' | 'nothing' = 'nothing',
  ) {}
  check = () => true;
  async run(m: Model, w: World) {
    const label = this.toString();
    providerDisturbed(m);
    const target = this.then === 'nothing' ? undefined : await authorizedPayment(m, w, this.merchant, this.then, label);
    await w.outage(this.kind, OUTAGE_MS);
    m.trace.push(label);
    if (!target || this.then === 'nothing') return;
    const kind = this.then;
    const key = fresh(m, kind === 'capture' ? 'cap' : 'ref');
    const body = kind === 'capture' ? {} : { amount: 400 };
    const r = await sendOp(m, w, target, kind, key, body, `${label} ${kind} during the outage`);
    assertOneOf(m, label, r, OP_ANSWERS);
    m.ops.push({
      kind,
      merchant: target.merchant,
      paymentKey: target.key,
      key,
      body,
      consumed: accepted(r),
      settlesWithoutOperator: label,
    });
  }
  toString = () =>
    `providerOutage(${this.kind}, ${OUTAGE_MS / 1000} s${this.then === 'nothing' ? '' : `, ${this.merchant} ${this.then} during it`})`;
}

/** A new payment, authorized (for a capture) or captured (for a refund) before a fault the command sets up next. */
async function authorizedPayment(
  m: Model,
  w: World,
  merchant: MerchantName,
  then: 'capture' | 'refund',
  label: string,
): Promise<PaymentRec | undefined> {
  const body = newCharge(m, then === 'capture' ? 'manual' : 'automatic');
  const r = await sendCharge(m, w, merchant, fresh(m, 'pay'), body, `${label} payment`);
  const target = r.status === 200 ? m.payments.at(-1) : undefined;
  return ['authorized', 'succeeded'].includes(target?.view?.status ?? '') ? target : undefined;
}

/**
 * One 429 with `Retry-After` longer than every budget (the model's minutes): the fleet's cool-down then holds every
 * write. `then`: a capture (of a new manual payment authorized just before) or a refund (of a new automatic one) sent
 * during the cool-down, which never leaves: a refusal the caller can act on, never an unknown outcome sent to review
 * (issue 19, defect 4).
 */
export class LongRetryAfter implements Cmd {
  constructor(
    readonly merchant: MerchantName,
    readonly then: 'capture' | 'refund' | 'nothing',
  ) {}
  check = () => true;
  async run(m: Model, w: World) {
    const label = this.toString();
    providerDisturbed(m);
    const target = this.then === 'nothing' ? undefined : await authorizedPayment(m, w, this.merchant, this.then, label);
    await setCoolDown(m, w, this.merchant, label);
    if (!target || this.then === 'nothing') return;
    const kind = this.then === 'capture' ? 'capture' : 'refund';
    const key = fresh(m, kind === 'capture' ? 'cap' : 'ref');
    const body = kind === 'capture' ? {} : { amount: 400 };
    const r = await sendOp(m, w, target, kind, key, body, `${label} ${kind} during the cool-down`);
    assertOneOf(m, label, r, OP_ANSWERS);
    m.ops.push({ kind, merchant: target.merchant, paymentKey: target.key, key, body, consumed: accepted(r) });
  }
  toString = () => `longRetryAfter(${this.merchant}, ${LONG_RETRY_AFTER_S} s, then ${this.then})`;
}

const settled = (v: PaymentView | undefined) =>
  v !== undefined && !['pending', 'unknown', 'requires_action', 'needs_review'].includes(v.status);

/**
 * A settled payment's key is repeated while a new key of the same order is still pending (its create held at the
 * provider): the repeat answers its own first answer, never 409 `payment_in_flight` naming the other key (issue 19,
 * defect 7).
 */
export class RepeatWhileOrderOpen implements Cmd {
  constructor(readonly index: number) {}
  check = (m: Readonly<Model>) => m.payments.length > 0;
  async run(m: Model, w: World) {
    const p = pick(m, this.index, (x) => x.view?.status === 'declined') as PaymentRec;
    const label = `${this} [${p.merchant}/${p.key}]`;
    const deadline = Date.now() + 15_000;
    while (!settled(p.view) && Date.now() < deadline) {
      const v = await w.api('GET', `/v1/payments/${p.key}`, { merchant: p.merchant });
      if (v.status === 200) see(p, v.body as unknown as PaymentView);
      if (!settled(p.view)) await sleep(250);
    }
    if (!settled(p.view)) {
      m.trace.push(`${label}: still ${String(p.view?.status)}, skipped`);
      return;
    }
    // Longer than the API's submit wait: the second key answers 202 and stays pending meanwhile.
    await arm(w, { kind: 'latency', latencyMs: 6_000 }, 'create', p.body.orderId);
    const second = await sendCharge(m, w, p.merchant, fresh(m, 'pay'), { ...p.body }, `${label} second key`);
    const r = await w.api('POST', '/v1/payments', { merchant: p.merchant, key: p.key, body: p.body });
    m.trace.push(`${label} repeat while the second key is ${describeAnswer(second)} -> ${describeAnswer(r)}`);
    m.seen.push(seenOf(m, 'charge', p.merchant, p.key, p.key, p.body.amount.value, r));
    if (!MOVING.includes(String(r.status)) || r.body.key !== p.key)
      violation(
        m,
        `${label}: the repeat of a settled key answered ${describeAnswer(r)} instead of its own first answer ` +
          `(${String(p.view?.status)}): ${JSON.stringify(r.body)}`,
      );
    see(p, r.body as unknown as PaymentView);
  }
  toString = () => `repeatWhileOrderOpen(#${this.index})`;
}
