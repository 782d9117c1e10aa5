/**
 * After a sequence: wait until it is quiet (every payment settled, no operation running, webhooks flushed), let an
 * operator resolve what is in review from the provider's records, then hold every answer and every payment against the
 * simulator's ledger and its payments.
 */
import { WorkflowNotFoundError } from '@temporalio/client';
import { captureWorkflowId, reconcileWorkflowId, refundWorkflowId } from '../../src/domain/ids';
import type { PaymentView } from '../../src/domain/payment';
import { operatorResolve } from './commands';
import { type Model, type PaymentRec, ModelViolation } from './model';
import type { MerchantName, SimEffect, SimPayment, World } from './world';

/** How long a sequence may take to settle after its last command. */
export const QUIESCENCE_MS = Number(process.env.FUZZ_QUIESCENCE_MS ?? 45_000);

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Why a payment is not quiet yet, or undefined when it is. */
async function unsettled(w: World, m: Model, p: PaymentRec): Promise<string | undefined> {
  const r = await w.api('GET', `/v1/payments/${p.key}`, { merchant: p.merchant });
  if (r.status !== 200) return `GET answered ${r.status}`;
  const view = r.body as unknown as PaymentView;
  p.view = view;
  if (view.status === 'pending' || view.status === 'unknown') return `status ${view.status}`;
  const running = view.operations?.filter((o) => o.state === 'running') ?? [];
  if (running.length > 0) return `operation ${running.map((o) => `${o.kind} ${o.key}`).join(', ')} running`;
  // The children of today's workflows; an id that was never started is simply not found.
  const merchantId = w.merchant(p.merchant).id;
  const ids = [
    reconcileWorkflowId(merchantId, 'create', p.key),
    ...m.ops
      .filter((o) => o.merchant === p.merchant && o.paymentKey === p.key)
      .flatMap((o) => [
        o.kind === 'capture' ? captureWorkflowId(merchantId, o.key) : refundWorkflowId(merchantId, o.key),
        reconcileWorkflowId(merchantId, o.kind, o.key),
      ]),
  ];
  for (const id of ids) {
    try {
      const d = await w.h.env.client.workflow.getHandle(id).describe();
      if (d.status.name === 'RUNNING') return `${id} running`;
    } catch (err) {
      if (!(err instanceof WorkflowNotFoundError)) throw err;
    }
  }
  return undefined;
}

/** Waits (bounded) until every payment of the sequence is quiet and the webhook queue is flushed. */
export async function quiesce(w: World, m: Model, timeoutMs = QUIESCENCE_MS): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    await w.sim.flushWebhooks();
    const waiting: string[] = [];
    for (const p of m.payments) {
      const why = await unsettled(w, m, p);
      if (why !== undefined) waiting.push(`${p.merchant}/${p.key}: ${why}`);
    }
    if (waiting.length === 0) return;
    if (Date.now() > deadline) {
      throw new ModelViolation(
        `not settled ${timeoutMs / 1000} s after the last command (nothing may stay pending/unknown/running):\n    ` +
          `${waiting.join('\n    ')}\n  sequence:\n    ${m.trace.join('\n    ')}`,
      );
    }
    await sleep(300);
  }
}

/** The whole end-of-sequence check; throws one {@link ModelViolation} listing every broken promise. */
export async function settleAndCheck(w: World, m: Model): Promise<void> {
  await quiesce(w, m);
  // Faults left armed (a spent budget, an unused rule) must not disturb the verdicts' look-ups or the reads below.
  await w.sim.clearFaults();
  // An operator resolves every review from the provider's records; then the payment must agree with the provider.
  const reviewed = m.payments.filter((p) => p.view?.status === 'needs_review');
  for (const p of reviewed) await operatorResolve(m, w, p, 'truth', 'final operator pass', false);
  if (reviewed.length > 0) await quiesce(w, m);
  await w.sim.flushWebhooks();

  const problems: string[] = [];
  const allEffects = await w.sim.effects();
  const references = new Set(m.payments.map((p) => p.body.orderId));
  const effects = allEffects.filter((e) => e.reference.includes(m.runId) || references.has(e.reference));

  // Every provider key the sequence could have caused, and whose it is.
  const intents = new Map<string, { merchant: MerchantName; operation: string; key: string }>();
  const addIntent = (merchant: MerchantName, operation: 'create' | 'capture' | 'refund' | 'void', key: string) =>
    intents.set(w.providerKey(merchant, operation, key), { merchant, operation, key });
  for (const s of m.seen) addIntent(s.merchant, s.what === 'charge' ? 'create' : s.what, s.key);
  for (const p of m.payments) {
    addIntent(p.merchant, 'create', p.key);
    addIntent(p.merchant, 'void', `${p.key}:void`);
  }
  for (const o of m.ops) addIntent(o.merchant, o.kind, o.key);

  // 1. At most one provider effect per (merchant, operation, key); every effect is one of ours.
  const byKey = new Map<string, SimEffect[]>();
  for (const e of effects) {
    if (e.idempotency_key === null) {
      problems.push(`an effect without an idempotency key: ${JSON.stringify(e)}`);
      continue;
    }
    byKey.set(e.idempotency_key, [...(byKey.get(e.idempotency_key) ?? []), e]);
    if (!intents.has(e.idempotency_key))
      problems.push(`an effect no request of the sequence explains: ${JSON.stringify(e)}`);
  }
  for (const [key, list] of byKey) {
    if (list.length > 1) {
      const who = intents.get(key);
      problems.push(
        `${list.length} effects for one key (${who?.merchant}/${who?.operation}/${who?.key}): ${JSON.stringify(list)}`,
      );
    }
  }

  // The final view of every payment, and the provider's payment it names.
  const finals = new Map<PaymentRec, { view: PaymentView; at?: SimPayment }>();
  for (const p of m.payments) {
    const r = await w.api('GET', `/v1/payments/${p.key}`, { merchant: p.merchant });
    const view = r.body as unknown as PaymentView;
    const at = view.providerPaymentId === undefined ? undefined : await w.sim.payment(view.providerPaymentId);
    finals.set(p, at === undefined ? { view } : { view, at });
  }
  const merchantOfProviderPayment = new Map<string, MerchantName>();
  for (const e of effects) {
    const who = e.operation === 'create' && e.idempotency_key ? intents.get(e.idempotency_key) : undefined;
    if (who) merchantOfProviderPayment.set(e.payment_id, who.merchant);
  }

  // 2. Every payment's view equals the provider's payment; nothing pending, running or in review.
  for (const [p, { view, at }] of finals) {
    const name = `${p.merchant}/${p.key}`;
    const merchantId = w.merchant(p.merchant).id;
    if (['pending', 'unknown', 'needs_review'].includes(view.status)) problems.push(`${name} stays ${view.status}`);
    if (view.operations?.some((o) => o.state === 'running')) problems.push(`${name} has an operation still running`);
    if (view.amountCaptured > view.amountAuthorized)
      problems.push(`${name}: captured > authorized: ${JSON.stringify(view)}`);
    if (view.amountRefunded > view.amountCaptured)
      problems.push(`${name}: refunded > captured: ${JSON.stringify(view)}`);
    const created = effects.find(
      (e) => e.operation === 'create' && e.idempotency_key === w.providerKey(p.merchant, 'create', p.key),
    );
    if (view.providerPaymentId === undefined) {
      if (created)
        problems.push(
          `${name} is ${view.status} without a provider payment, but the provider charged it: ${JSON.stringify(created)}`,
        );
      if (view.amountAuthorized + view.amountCaptured + view.amountRefunded > 0)
        problems.push(`${name}: amounts without a provider payment: ${JSON.stringify(view)}`);
      continue;
    }
    if (!at) {
      problems.push(`${name} names provider payment ${view.providerPaymentId}, which the provider does not know`);
      continue;
    }
    const ours = {
      status: view.status,
      authorized: view.amountAuthorized,
      captured: view.amountCaptured,
      refunded: view.amountRefunded,
    };
    const theirs = {
      status: at.status,
      authorized: at.amount,
      captured: at.amount_captured,
      refunded: at.amount_refunded,
    };
    if (JSON.stringify(ours) !== JSON.stringify(theirs))
      problems.push(`${name}: view ${JSON.stringify(ours)} but the provider says ${JSON.stringify(theirs)}`);
    if (
      at.metadata?.merchant_id !== merchantId ||
      at.metadata?.payment_key !== p.key ||
      at.reference !== p.body.orderId
    )
      problems.push(`${name} adopted a provider payment that is not its own: ${JSON.stringify(at)}`);
    if (at.amount_captured > at.amount || at.amount_refunded > at.amount_captured)
      problems.push(`provider payment ${at.id} breaks its own amounts: ${JSON.stringify(at)}`);
    if (created && created.payment_id !== view.providerPaymentId)
      problems.push(`${name} names ${view.providerPaymentId} but its create made ${created.payment_id}`);
  }

  // 3. Every provider payment the sequence created is some payment's; no effect lands on another merchant's payment.
  const claimed = new Set([...finals.values()].map((f) => f.view.providerPaymentId).filter((id) => id !== undefined));
  for (const e of effects) {
    const who = e.idempotency_key ? intents.get(e.idempotency_key) : undefined;
    if (e.operation === 'create' && !claimed.has(e.payment_id))
      problems.push(`provider payment ${e.payment_id} (${who?.merchant}/${who?.key}) belongs to no payment's view`);
    const owner = merchantOfProviderPayment.get(e.payment_id);
    if (e.operation !== 'create' && who && owner !== undefined && owner !== who.merchant)
      problems.push(`${who.merchant}'s ${e.operation} ${who.key} moved merchant ${owner}'s payment ${e.payment_id}`);
  }

  // 4. Every answer the test saw matches a provider fact.
  const acceptedKeys = new Set(
    m.seen.filter((s) => s.status >= 200 && s.status < 300).map((s) => `${s.merchant}/${s.what}/${s.key}`),
  );
  for (const s of m.seen) {
    const pk = w.providerKey(s.merchant, s.what === 'charge' ? 'create' : s.what, s.key);
    const effect = byKey.get(pk)?.[0];
    const label = `step ${s.step} ${s.what} ${s.merchant}/${s.key} -> ${s.status}`;
    const rec = m.payments.find((p) => p.merchant === s.merchant && p.key === s.paymentKey);
    const finalView = rec ? finals.get(rec)?.view : undefined;
    if (s.what === 'charge') {
      if (s.status !== 200) continue;
      const status = s.body.status as string;
      if (status === 'authorized' || status === 'succeeded') {
        if (!effect || effect.payment_id !== s.body.providerPaymentId || effect.amount !== s.amount)
          problems.push(
            `${label} ${status}, but the provider has ${effect ? JSON.stringify(effect) : 'no such charge'}`,
          );
      } else if (effect) {
        problems.push(`${label} ${status}, but the provider charged it: ${JSON.stringify(effect)}`);
      }
      continue;
    }
    if (s.status === 200) {
      // A 200 is the provider's confirmation of exactly this operation on exactly this payment.
      // A capture without an amount takes the whole authorization (one capture per payment at this provider).
      const expected = s.amount ?? (s.what === 'capture' ? rec?.body.amount.value : undefined);
      const onPayment = finalView?.providerPaymentId ?? (s.body.providerPaymentId as string | undefined);
      if (!effect || effect.payment_id !== onPayment || effect.amount !== expected)
        problems.push(
          `${label} (amount ${expected}), but the provider has ${effect ? JSON.stringify(effect) : `no ${s.what} for that key`}`,
        );
    } else if (s.status === 422 && s.body.error?.type === 'provider_rejected' && effect) {
      problems.push(`${label} provider_rejected, but the provider did it: ${JSON.stringify(effect)}`);
    } else if (s.status >= 400 && !acceptedKeys.has(`${s.merchant}/${s.what}/${s.key}`) && effect) {
      const refusedOnly = m.seen.every(
        (o) => !(o.merchant === s.merchant && o.what === s.what && o.key === s.key) || o.status >= 400,
      );
      if (refusedOnly && !m.ops.some((o) => o.merchant === s.merchant && o.key === s.key && o.consumed))
        problems.push(
          `${label} ${String(s.body.error?.type)}, every answer refused it, but the provider did it: ${JSON.stringify(effect)}`,
        );
    }
  }

  if (problems.length > 0) {
    throw new ModelViolation(
      `after the sequence settled:\n    ${problems.join('\n    ')}\n  sequence:\n    ${m.trace.join('\n    ')}`,
    );
  }
}
