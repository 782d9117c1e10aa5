/**
 * The reconcile sweep's stuck-unknown step over the Stripe adapter (issue 12): a Stripe payment whose create outcome
 * stayed `unknown` past `unknownThresholdMs`, with no reconcile running (its reconcile was lost: terminated, as in
 * test/workflows/sweep.test.ts over the simulator), is signalled by the sweep; the reconcile it starts asks Stripe
 * through the adapter (Search API by the `reference` metadata) and the payment ends as Stripe shows it, or as the
 * reconcile decides when Stripe has no such PaymentIntent: the create sent again with the same Idempotency-Key while the
 * key lives, else review.
 *
 * The whole stack on the run's dev server (visibility for the sweep): the HTTP API, a real worker serving `stripe`
 * with the adapter built from the configuration, the sweep's activities. What Stripe holds is played by stripe-mock
 * behind the recording front (test/helpers/stripe-states.ts; see test/providers/stripe-workflows.test.ts for what is
 * real, canned and recorded): "the create committed, its answer lost" is a create forwarded to stripe-mock and answered
 * with Stripe's recorded 500; "Stripe shows it" is a stripe-mock whose PaymentIntent fixture is that PaymentIntent with
 * the metadata the adapter sent, answering the sweep's list and the reconcile's search.
 */
import { randomUUID } from 'node:crypto';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { providerIdempotencyKey } from '../../src/activities/keys';
import { chargeWorkflowId, reconcileWorkflowId } from '../../src/domain/ids';
import type { PaymentView } from '../../src/domain/payment';
import type { SweepResult } from '../../src/domain/sweep';
import type { reconcileSweepWorkflow } from '../../src/workflows/sweep';
import { type StripeWorld, chargeBody, newKey, startWorld } from '../helpers/world';
import { eventually } from '../helpers/eventually';
import { connectDevServer } from '../helpers/servers';
import { type StripeStates, metadataSent } from '../helpers/stripe-states';
import { sweepInputOver } from '../helpers/sweeps';
import { terminateAll } from '../helpers/terminate';

const AMOUNT = 1_500;
/**
 * A reconcile waits 2.5 s before each lookup (time to end the first one as lost); a resend is allowed after 2 s, so
 * the sweep's reconcile may resend at its first lookup, with the second to look after it.
 */
const RECONCILE_SCHEDULE_MS = [2_500, 2_500];
const SETTLE_WINDOW_MS = 2_000;

let env: TestWorkflowEnvironment;
let h: StripeWorld;
let states: StripeStates;
/** Workflows a test leaves running (review items the sweep raised), ended after the file. */
const leftovers = new Set<string>();

beforeAll(async () => {
  env = await connectDevServer();
  h = await startWorld(env, {
    api: true,
    stripeMock: { name: 'stripe-sweep', authorized: AMOUNT, captured: AMOUNT },
    sweep: true,
    timings: { reconcileScheduleMs: RECONCILE_SCHEDULE_MS, settleWindowMs: SETTLE_WINDOW_MS },
  });
  ({ states } = h.stripeMock);
}, 120_000);

afterAll(async () => {
  if (env) await terminateAll(env.client, leftovers);
  await h?.close();
  await env?.teardown();
});

/** Every test's charges end with it: a payment a failed test leaves unknown must not be swept by the next one. */
const charges = new Set<string>();
afterEach(async () => {
  await terminateAll(env.client, charges);
  charges.clear();
});

const view = async (key: string): Promise<PaymentView> =>
  (await h.request('GET', `/v1/payments/${key}`)).body as unknown as PaymentView;

/** Visibility shows exactly these charge workflows of the world's task queue as unknown (the sweep reads it). */
const visiblyUnknown = (workflowIds: string[]) =>
  eventually(
    'visibility to show the payment unknown',
    async () => {
      const response = await env.client.workflowService.listWorkflowExecutions({
        namespace: env.namespace ?? 'default',
        query: `TaskQueue = '${h.taskQueue}' AND PaymentStatus = 'unknown' AND ExecutionStatus = 'Running'`,
        pageSize: 100,
      });
      const ids = response.executions.flatMap((e) => (e.execution?.workflowId ? [e.execution.workflowId] : []));
      return ids.length === workflowIds.length && workflowIds.every((id) => ids.includes(id));
    },
    20_000,
  );

/**
 * A Stripe charge left `unknown` with no reconcile running: its creates are answered as `prepare` arranged (500s), its
 * first reconcile is ended as lost (terminated) before its first lookup. Answers the payment's order id.
 */
async function stuckUnknownCharge(key: string): Promise<{ orderId: string }> {
  const body = chargeBody({ provider: 'stripe', amount: { value: AMOUNT, currency: 'EUR' } });
  charges.add(chargeWorkflowId(h.a.id, key));
  const started = await h.request('POST', '/v1/payments', { key, body });
  expect(started.status).toBe(202);
  await eventually('the payment to be unknown', async () => (await view(key)).status === 'unknown', 30_000);
  const reconcile = env.client.workflow.getHandle(reconcileWorkflowId(h.a.id, 'create', key));
  await eventually('the first reconcile to run', async () => {
    try {
      return (await reconcile.describe()).status.name === 'RUNNING';
    } catch {
      return false; // not started yet
    }
  });
  await reconcile.terminate('a lost reconcile: the payment waits for the sweep');
  // The charge survives its reconcile's loss: still unknown, waiting for the sweep's ensureReconcile.
  expect((await view(key)).status).toBe('unknown');
  await visiblyUnknown([chargeWorkflowId(h.a.id, key)]);
  return { orderId: body.orderId as string };
}

/** One sweep run over Stripe now, with a threshold of 1 ms: an unknown payment is "stuck" already. */
async function sweepNow(): Promise<SweepResult> {
  const now = Date.now();
  const result = await env.client.workflow.execute<typeof reconcileSweepWorkflow>('reconcileSweepWorkflow', {
    workflowId: `sweep-stripe-stuck:${randomUUID()}`,
    taskQueue: h.taskQueue,
    args: [
      sweepInputOver({ fromMs: now - 60_000, toMs: now + 2_000 }, { providers: ['stripe'], unknownThresholdMs: 1 }),
    ],
  });
  for (const id of result.reviewItems) leftovers.add(id);
  return result;
}

/**
 * Runs the sweep while Stripe shows `intent` (to the sweep's list and the reconcile's search), then waits until the
 * payment leaves `unknown`. The sweep must have found it stuck and signalled it: without that nothing moves it.
 */
async function sweepUntilSettled(
  key: string,
  intent: Record<string, unknown>,
  timeoutMs: number,
): Promise<{ result: SweepResult; settled: PaymentView }> {
  return states.listing(
    intent,
    async () => {
      const result = await sweepNow();
      expect(result).toMatchObject({ stuckUnknown: 1, reconcilesEnsured: 1 });
      const settled = await eventually(
        'the payment to leave unknown',
        async () => {
          const v = await view(key);
          return v.status !== 'unknown' && v;
        },
        timeoutMs,
      );
      return { result, settled };
    },
    { search: true },
  );
}

/** The reconcile's searches the adapter sent for `orderId` (Stripe's Search API on our `reference` metadata). */
const searchesFor = (orderId: string) =>
  states.front.seen.filter(
    (r) =>
      r.method === 'GET' &&
      r.path === '/v1/payment_intents/search' &&
      r.query.get('query') === `metadata['reference']:'${orderId}'`,
  );

/** A PaymentIntent Stripe shows nothing of ours in: it never moved money, so the adapter lists and finds none. */
const nothingOfOurs = {
  id: `pi_none${randomUUID().replace(/-/g, '').slice(0, 16)}`,
  status: 'requires_payment_method',
};

describe('the sweep over Stripe: a payment stuck in unknown', () => {
  it('the create committed at Stripe, its answer lost: the sweep’s reconcile finds the PaymentIntent by metadata search and the payment settles to it, one create effect', async () => {
    const key = newKey();
    states.lostAnswers.add(key);
    const { orderId } = await stuckUnknownCharge(key);
    // Stripe holds exactly one PaymentIntent for it (the first create, committed); every answer was a 500.
    const intent = states.committed.get(key);
    expect(intent?.id).toEqual(expect.stringMatching(/^pi_/));
    const creates = states.createsOf(key);
    expect(new Set(creates.map((r) => r.answeredStatus))).toEqual(new Set([500]));
    expect(new Set(creates.map((r) => r.headers['idempotency-key']))).toEqual(
      new Set([providerIdempotencyKey(h.a.id, 'create', key)]),
    );
    const searchesBefore = searchesFor(orderId).length;

    // What Stripe shows: that PaymentIntent, succeeded, with the amount and the metadata the adapter sent.
    const shown = {
      ...intent,
      status: 'succeeded',
      amount: AMOUNT,
      amount_received: AMOUNT,
      currency: 'eur',
      created: Math.floor(Date.now() / 1000),
      metadata: metadataSent(creates[0]),
    };
    const { result, settled } = await sweepUntilSettled(key, shown, 30_000);

    expect(result).toMatchObject({
      stuckUnknown: 1,
      reconcilesEnsured: 1,
      // The sweep's second step saw it too, while our payment still called it unknown: a disagreement, as over the
      // simulator (test/workflows/sweep.test.ts).
      providerPaymentsChecked: 1,
      disagreements: 1,
      orphans: 0,
    });
    expect(settled).toMatchObject({
      status: 'succeeded',
      provider: 'stripe',
      providerPaymentId: intent?.id,
      amountCaptured: AMOUNT,
    });
    // Found by the adapter's search on our metadata, not by sending the charge again: still the one create Stripe
    // committed, and no create was sent after the sweep.
    expect(searchesFor(orderId).length).toBeGreaterThan(searchesBefore);
    expect(states.createsOf(key)).toHaveLength(creates.length);
    expect(states.createsOf(key).filter((r) => r.answeredStatus === 200)).toEqual([]);
  });

  it('Stripe has no such PaymentIntent, the key still lives: the sweep’s reconcile sends the create again with the same key; Stripe’s answer settles it, one create effect', async () => {
    const key = newKey();
    states.failingCreates.add(key); // every create answered 500 before it reached Stripe: nothing committed
    const { orderId } = await stuckUnknownCharge(key);
    const before = states.createsOf(key);
    expect(before.length).toBeGreaterThanOrEqual(1);
    expect(new Set(before.map((r) => r.answeredStatus))).toEqual(new Set([500]));
    const searchesBefore = searchesFor(orderId).length;
    states.failingCreates.delete(key); // Stripe answers again

    const { result, settled } = await sweepUntilSettled(key, nothingOfOurs, 40_000);

    expect(result).toMatchObject({ stuckUnknown: 1, reconcilesEnsured: 1, providerPaymentsChecked: 0 });
    // The reconcile looked first (Stripe showed nothing of ours), then resent the create under the same key.
    expect(searchesFor(orderId).length).toBeGreaterThan(searchesBefore);
    const after = states.createsOf(key).slice(before.length);
    expect(after.map((r) => [r.headers['idempotency-key'], r.answeredStatus])).toEqual([
      [providerIdempotencyKey(h.a.id, 'create', key), 200],
    ]);
    const answered = JSON.parse(after[0]?.answeredBody ?? '{}') as { id?: string };
    expect(answered.id).toEqual(expect.stringMatching(/^pi_/));
    expect(settled).toMatchObject({ status: 'succeeded', provider: 'stripe', providerPaymentId: answered.id });
    // The only create Stripe ever committed is that one.
    expect(states.createsOf(key).filter((r) => r.answeredStatus === 200)).toHaveLength(1);
  });

  it('Stripe has no such PaymentIntent and the resend is lost too: the sweep’s reconcile ends the payment in review, never failed', async () => {
    const key = newKey();
    states.failingCreates.add(key); // every create, the reconcile's resend too, answered 500
    const { orderId } = await stuckUnknownCharge(key);
    const before = states.createsOf(key).length;
    const searchesBefore = searchesFor(orderId).length;

    const { result, settled } = await sweepUntilSettled(key, nothingOfOurs, 90_000);

    expect(result).toMatchObject({ stuckUnknown: 1, reconcilesEnsured: 1 });
    expect(settled.status).toBe('needs_review');
    expect(settled.review?.reason).toContain('2 resubmissions with the same key were sent, their outcomes unknown');
    expect(settled.providerPaymentId).toBeUndefined();
    // Both checks of its schedule looked (nothing of ours), and the resend after each was lost.
    expect(searchesFor(orderId).length - searchesBefore).toBeGreaterThanOrEqual(RECONCILE_SCHEDULE_MS.length);
    const resent = states.createsOf(key).slice(before);
    expect(resent.length).toBeGreaterThanOrEqual(1);
    expect(new Set(resent.map((r) => [r.headers['idempotency-key'], r.answeredStatus].join(' ')))).toEqual(
      new Set([`${providerIdempotencyKey(h.a.id, 'create', key)} 500`]),
    );
  }, 150_000);
});
