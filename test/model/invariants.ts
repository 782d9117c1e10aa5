/**
 * After a sequence: wait until it is quiet (every payment settled, no operation running, webhooks flushed), let an
 * operator resolve what is in review from the provider's records, then hold every answer and every view read against
 * the simulator's ledger and its payments.
 */
import { expectedKeyScopes, keyRecordsUnlikeAnswers, missingKeyRecords } from '../../bench/soak-key-records';
import { WorkflowNotFoundError } from '@temporalio/client';
import { captureWorkflowId, chargeWorkflowId, reconcileWorkflowId, refundWorkflowId } from '../../src/domain/ids';
import type { PaymentView } from '../../src/domain/payment';
import { checkMoneyInvariant, invariantAnswer } from '../../bench/money-invariant';
import { operatorResolve } from './commands';
import { type Model, type PaymentRec, ModelViolation, paymentOf, see } from './model';
import { type LedgerEntry, type WalletCase, cardSide, checkWallets, readLedger } from '../../bench/wallet-invariants';
import type { MerchantName, SimEffect, SimPayment, World } from './world';
import type { LedgerRequest } from '../../src/simulator/server';

/** How long a sequence may take to settle after its last command. */
export const QUIESCENCE_MS = Number(process.env.FUZZ_QUIESCENCE_MS ?? 45_000);
/** How long the end-of-sequence check waits for key records still being handed over (a retry waits 1 s, then 2). */
const KEY_RECORD_WAIT_MS = 20_000;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Why a payment is not quiet yet, or undefined when it is. */
async function unsettled(w: World, m: Model, p: PaymentRec): Promise<string | undefined> {
  const r = await w.api('GET', `/v1/payments/${p.key}`, { merchant: p.merchant });
  if (r.status !== 200) return `GET answered ${r.status}`;
  const view = r.body as unknown as PaymentView;
  see(p, view);
  if (view.status === 'pending' || view.status === 'unknown' || view.status === 'requires_action')
    return `status ${view.status}`;
  // A wallet part follows its payment's end within moments (its own activity): captured or released.
  if (view.wallet?.status === 'held' && ['succeeded', 'declined', 'failed', 'voided'].includes(view.status))
    return `wallet part still held while ${view.status}`;
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

/** Waits (bounded) until every payment of the sequence is quiet and the webhook queue is flushed; answers what is not. */
export async function quiesce(w: World, m: Model, timeoutMs = QUIESCENCE_MS): Promise<string[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    await w.sim.flushWebhooks();
    const waiting: string[] = [];
    for (const p of m.payments) {
      const why = await unsettled(w, m, p);
      if (why !== undefined) waiting.push(`${p.merchant}/${p.key}: ${why}`);
    }
    if (waiting.length === 0 || Date.now() > deadline) return waiting;
    await sleep(300);
  }
}

/**
 * A capture or refund sent during a provider outage that is in review once the provider is back: its reconcile could
 * have resent it with the same key (the model's provider honours keys), so an operator was called for nothing.
 */
function operatorNeededAfterOutage(m: Model): string[] {
  return m.ops.flatMap((o) => {
    if (o.settlesWithoutOperator === undefined) return [];
    const p = m.payments.find((x) => x.merchant === o.merchant && x.key === o.paymentKey);
    const op = p?.view?.operations?.find((x) => x.kind === o.kind && x.key === o.key);
    if (op?.state !== 'needs_review') return [];
    return [
      `${o.merchant}/${o.paymentKey}: ${o.kind} ${o.key} (${o.settlesWithoutOperator}) is in review after the provider ` +
        `came back, though a resend with its key would settle it${op.reason ? ` (${op.reason})` : ''}`,
    ];
  });
}

/**
 * An expired payment whose cancels the provider was set to refuse first: it was cancelled only after every refusal
 * (each a try the expired wait made and went on from), so the adversary did what its command says.
 */
function refusedCancelsSeen(
  m: Model,
  finals: ReadonlyMap<PaymentRec, { view: PaymentView }>,
  requests: readonly LedgerRequest[],
): string[] {
  return m.payments.flatMap((p) => {
    const view = finals.get(p)?.view;
    if (!p.refusedCancels || view?.declineCode !== 'action_expired') return [];
    const voids = requests.filter((r) => r.operation === 'void' && r.reference === p.body.orderId);
    const refused = voids.filter((r) => r.status === p.refusedCancels?.status).length;
    const took = voids.some((r) => r.status === 200);
    return refused === p.refusedCancels.times && took
      ? []
      : [
          `${p.merchant}/${p.key}: expired after ${refused} refused cancels of ${p.refusedCancels.times} armed ` +
            `(${voids.map((r) => r.status).join(', ')})`,
        ];
  });
}

/**
 * The whole end-of-sequence check; throws one {@link ModelViolation} listing every broken promise: the money invariant
 * every ledger harness holds (bench/money-invariant.ts) and the model's own (every effect explained, no payment
 * adopted from another merchant or moved by one).
 */
export async function settleAndCheck(w: World, m: Model): Promise<void> {
  const problems: string[] = [];
  let open = await quiesce(w, m);
  // Faults left armed (a spent budget, an unused rule) must not disturb the verdicts' look-ups or the reads below.
  await w.sim.clearFaults();
  problems.push(...operatorNeededAfterOutage(m));
  // An operator resolves every review from the provider's records; then the payment must agree with the provider.
  const reviewed = m.payments.filter((p) => p.view?.status === 'needs_review');
  for (const p of reviewed) {
    try {
      await operatorResolve(m, w, p, 'truth', 'final operator pass', false);
    } catch (err) {
      if (!(err instanceof ModelViolation)) throw err;
      problems.push(err.message.split('\n')[0] ?? err.message);
    }
  }
  if (reviewed.length > 0) open = await quiesce(w, m);
  if (open.length > 0)
    problems.push(
      `not settled ${QUIESCENCE_MS / 1000} s after the last command (nothing may stay pending/unknown/running):\n      ` +
        open.join('\n      '),
    );
  await w.sim.flushWebhooks();

  const ledger = { effects: await w.sim.effects(), requests: await w.sim.requests() };
  const references = new Set(m.payments.map((p) => p.body.orderId));
  const effects = ledger.effects.filter((e) => e.reference.includes(m.runId) || references.has(e.reference));

  // The final view of every payment, and the provider's payment it names.
  const finals = new Map<PaymentRec, { view: PaymentView; at?: SimPayment }>();
  for (const p of m.payments) {
    const r = await w.api('GET', `/v1/payments/${p.key}`, { merchant: p.merchant });
    const view = r.body as unknown as PaymentView;
    const at = view.providerPaymentId === undefined ? undefined : await w.sim.payment(view.providerPaymentId);
    finals.set(p, at === undefined ? { view } : { view, at });
    m.trace.push(
      `final ${p.merchant}/${p.key}: ${view.status}${view.failureReason ? ` (${view.failureReason})` : ''} ` +
        `auth=${view.amountAuthorized} cap=${view.amountCaptured} ref=${view.amountRefunded}`,
    );
  }

  const walletLedger = await readLedger(w.db);
  // The provider's side only (docs/http-api.md#payments-with-a-wallet-part): a wallet-only payment is none of the
  // provider's business, and a refund counts at the provider for its card share (what the wallet did not take).
  const card = cardSideOf(m, walletLedger.entries, (merchant) => w.merchant(merchant).id);
  const invariant = checkMoneyInvariant({
    payments: m.payments
      .filter((p) => !card.walletOnly(p))
      .map((p) => ({
        merchantId: w.merchant(p.merchant).id,
        key: p.key,
        capture: p.body.capture,
        final: card.view(p, finals.get(p)?.view) ?? { error: 'not read' },
        earlier: p.views.map((v) => card.view(p, v) as PaymentView),
      })),
    answers: m.seen.flatMap((s) => {
      const p = paymentOf(m, s.merchant, s.paymentKey);
      const amount = p && s.what === 'refund' ? card.refund(p, s.key, s.amount) : s.amount;
      if (p && (card.walletOnly(p) || amount === 0)) return [];
      const what = { paymentKey: s.paymentKey, kind: s.what, opKey: s.key, amount, status: s.status };
      return [invariantAnswer({ merchantId: w.merchant(s.merchant).id, ...what }, s.body)];
    }),
    ledger: { effects, requests: ledger.requests },
    reviewsResolved: true,
  });
  problems.push(...invariant.map((p) => `${p.kind} ${p.message}`));
  problems.push(...refusedCancelsSeen(m, finals, ledger.requests));
  problems.push(...ownership(w, m, effects, finals));
  problems.push(
    ...checkWallets({
      ...walletLedger,
      payments: walletCases(w, m, finals),
      effects: ledger.effects,
      requests: ledger.requests,
    }),
  );

  // Every answered key has its record: the payments hand their events and key answers over in one activity a task,
  // through the sequence's worker kills and deploys (bench/soak-key-records.ts; a handoff may still be in flight).
  const keyScopes = expectedKeyScopes(
    m.payments.map((p) => ({ merchantId: w.merchant(p.merchant).id, key: p.key, view: finals.get(p)?.view })),
  );
  const unrecorded = await missingKeyRecords(w.db, keyScopes, KEY_RECORD_WAIT_MS);
  problems.push(...unrecorded.map((scope) => `no key record for ${scope}: its first answer was never handed over`));
  // ... and holds what the client was answered: a charge's 200 with an answered status is its first answer or a replay.
  const clientAnswers = m.seen
    .filter((s) => s.what === 'charge' && s.status === 200)
    .map((s) => ({ scope: chargeWorkflowId(w.merchant(s.merchant).id, s.key), body: s.body }));
  problems.push(...(await keyRecordsUnlikeAnswers(w.db, clientAnswers)).unlike);

  if (problems.length > 0) {
    throw new ModelViolation(
      `after the sequence settled:\n    ${problems.join('\n    ')}\n  sequence:\n    ${m.trace.join('\n    ')}`,
    );
  }
}

/**
 * The model's own checks, beyond the money invariant: every effect is one of the sequence's requests, every provider
 * payment it created is some payment's, a payment adopts only its own provider payment, and no merchant's capture or
 * refund moves another merchant's payment.
 */
function ownership(
  w: World,
  m: Model,
  effects: readonly SimEffect[],
  finals: ReadonlyMap<PaymentRec, { view: PaymentView; at?: SimPayment }>,
): string[] {
  const problems: string[] = [];
  // Every provider key the sequence could have caused, and whose it is.
  const intents = new Map<string, { merchant: MerchantName; operation: string; key: string }>();
  const addIntent = (merchant: MerchantName, operation: 'create' | 'capture' | 'refund' | 'void', key: string) =>
    intents.set(w.providerKey(merchant, operation, key), { merchant, operation, key });
  for (const s of m.seen) addIntent(s.merchant, s.what === 'charge' ? 'create' : s.what, s.key);
  for (const p of m.payments) {
    addIntent(p.merchant, 'create', p.key);
    addIntent(p.merchant, 'void', `${p.key}:void`);
    // The cancel of a payment whose customer never acted (customer-action.ts).
    addIntent(p.merchant, 'void', `${p.key}:cancel`);
  }
  for (const o of m.ops) addIntent(o.merchant, o.kind, o.key);
  for (const e of effects) {
    if (e.idempotency_key === null) problems.push(`an effect without an idempotency key: ${JSON.stringify(e)}`);
    else if (!intents.has(e.idempotency_key))
      problems.push(`an effect no request of the sequence explains: ${JSON.stringify(e)}`);
  }
  const merchantOfProviderPayment = new Map<string, MerchantName>();
  for (const e of effects) {
    const who = e.operation === 'create' && e.idempotency_key ? intents.get(e.idempotency_key) : undefined;
    if (who) merchantOfProviderPayment.set(e.payment_id, who.merchant);
  }
  for (const [p, { view, at }] of finals) {
    const name = `${p.merchant}/${p.key}`;
    if (view.providerPaymentId === undefined) continue;
    if (!at) {
      problems.push(`${name} names provider payment ${view.providerPaymentId}, which the provider does not know`);
      continue;
    }
    if (
      at.metadata?.merchant_id !== w.merchant(p.merchant).id ||
      at.metadata?.payment_key !== p.key ||
      at.reference !== p.body.orderId
    )
      problems.push(`${name} adopted a provider payment that is not its own: ${JSON.stringify(at)}`);
    if (at.amount_captured > at.amount || at.amount_refunded > at.amount_captured)
      problems.push(`provider payment ${at.id} breaks its own amounts: ${JSON.stringify(at)}`);
  }
  const claimed = new Set([...finals.values()].map((f) => f.view.providerPaymentId).filter((id) => id !== undefined));
  for (const e of effects) {
    const who = e.idempotency_key ? intents.get(e.idempotency_key) : undefined;
    if (e.operation === 'create' && !claimed.has(e.payment_id))
      problems.push(`provider payment ${e.payment_id} (${who?.merchant}/${who?.key}) belongs to no payment's view`);
    const owner = merchantOfProviderPayment.get(e.payment_id);
    if (e.operation !== 'create' && who && owner !== undefined && owner !== who.merchant)
      problems.push(`${who.merchant}'s ${e.operation} ${who.key} moved merchant ${owner}'s payment ${e.payment_id}`);
  }
  return problems;
}

/** The card side of the sequence's payments with a wallet part (bench/wallet-invariants.ts' cardSide), by PaymentRec. */
function cardSideOf(m: Model, entries: readonly LedgerEntry[], merchantId: (name: MerchantName) => string) {
  const card = cardSide(entries);
  const refund = (p: PaymentRec, key: string, amount: number | undefined): number | undefined =>
    card.refund(merchantId(p.merchant), p.body.wallet !== undefined, key, amount);
  const requested = (p: PaymentRec, key: string) =>
    m.ops.find((o) => o.merchant === p.merchant && o.paymentKey === p.key && o.key === key)?.body.amount;
  return {
    walletOnly: (p: PaymentRec) => card.walletOnly(p.body.amount.value, p.body.wallet),
    refund,
    view: (p: PaymentRec, view: PaymentView | undefined): PaymentView | undefined =>
      card.view(merchantId(p.merchant), p.body.wallet !== undefined, view, (key) => requested(p, key)),
  };
}

/** The sequence's payments with a wallet part, as they ended, for the wallet checks. */
function walletCases(
  w: World,
  m: Model,
  finals: ReadonlyMap<PaymentRec, { view: PaymentView; at?: SimPayment }>,
): WalletCase[] {
  return m.payments.flatMap((p) => {
    const part = p.body.wallet;
    const view = finals.get(p)?.view;
    if (part === undefined || view === undefined) return [];
    const refunds = m.ops
      .filter((o) => o.kind === 'refund' && o.merchant === p.merchant && o.paymentKey === p.key)
      .map((o) => ({
        key: o.key,
        amount: o.body.amount ?? 0,
        providerKey: w.providerKey(p.merchant, 'refund', o.key),
      }));
    return [
      {
        merchantId: w.merchant(p.merchant).id,
        key: p.key,
        total: p.body.amount.value,
        walletId: part.walletId,
        walletAmount: part.amount,
        view,
        createKey: w.providerKey(p.merchant, 'create', p.key),
        refunds,
      },
    ];
  });
}
