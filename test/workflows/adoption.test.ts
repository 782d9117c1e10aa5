/**
 * Two merchants of ours share one provider account (one api key), and charge the same order for the same amount. A's
 * create is lost; B's succeeds. A's reconcile (time-skipping server, real simulator over HTTP) must not adopt B's
 * payment, and B's event must not be applied to A's workflow: A ends in needs_review after its schedule.
 */
import { paymentQuery, webhookSignal } from '../../src/domain/definitions';
import { reconcileWorkflowId } from '../../src/domain/ids';
import type { ChargeWorkflowInput } from '../../src/domain/workflow-inputs';
import { providerIdempotencyKey } from '../../src/activities/keys';
import { type World, timeSkippingServerPerTest } from '../helpers/world';
import { eventually } from '../helpers/eventually';
import { chargeRequest } from '../helpers/payments';
import { effectsOf, requestsOf, startCharge, waitForStatus } from '../helpers/workflows';

const t = timeSkippingServerPerTest();

const schedule = { reconcileScheduleMs: [3_600_000, 6 * 3_600_000] };

/** Merchant A's and merchant B's charges of one order and amount, on the world's one provider api key. */
function twoMerchants(b: World): { a: ChargeWorkflowInput; b: ChargeWorkflowInput } {
  const request = chargeRequest();
  const a = b.input(request, { timings: schedule });
  return { a, b: { ...b.input(request, { timings: schedule }), merchantId: `${b.merchantId}_b` } };
}

/** Makes A's create (and only A's, by its derived key) hit `fault` once. */
function loseCreateOf(b: World, input: ChargeWorkflowInput, fault: 'reset_before_commit' | 'commit_then_drop') {
  const key = providerIdempotencyKey(input.merchantId, 'create', input.key);
  b.sim.addFaults({ rules: [{ match: { operation: 'create', key }, fault, times: 1 }] });
}

/** Waits (bounded) until a workflow task completed after the workflow received `signalName`: the handler has run. */
async function handledSignal(workflowId: string, signalName: string): Promise<void> {
  await eventually(
    `${workflowId} handling ${signalName}`,
    async () => {
      const events = (await t.env.client.workflow.getHandle(workflowId).fetchHistory()).events ?? [];
      const signalled = events.findIndex((e) => e.workflowExecutionSignaledEventAttributes?.signalName === signalName);
      return signalled >= 0 && events.slice(signalled).some((e) => e.workflowTaskCompletedEventAttributes);
    },
    15_000,
    100,
  );
}

describe('reconcile by reference, two merchants on one provider account', () => {
  it('A’s create never committed, B’s of the same order and amount succeeded: A’s reconcile does not adopt it; A ends in needs_review', async () => {
    const b = await t.world({ noKeys: true });
    await b.run(async () => {
      const { a: inputA, b: inputB } = twoMerchants(b);
      loseCreateOf(b, inputA, 'reset_before_commit');
      const { handle: handleA, view: firstA } = await startCharge(b, inputA);
      expect(firstA.status).toBe('unknown');
      const { view: viewB } = await startCharge(b, inputB);
      expect(viewB.status).toBe('succeeded');

      await t.env.sleep('61 minutes');
      // The first check ran (a lookup by reference that sees B's payment) and A is still unknown.
      const afterCheck = await handleA.query(paymentQuery);
      expect(requestsOf(b, 'lookup').length).toBeGreaterThanOrEqual(1);
      expect(afterCheck.providerPaymentId).toBeUndefined();
      expect(afterCheck.status).toBe('unknown');

      await t.env.sleep('6 hours');
      const review = await waitForStatus(handleA, 'needs_review');
      expect(review.providerPaymentId).toBeUndefined();
      expect(review).toMatchObject({ amountAuthorized: 0, amountCaptured: 0 });
      const reconcile = t.env.client.workflow.getHandle(reconcileWorkflowId(inputA.merchantId, 'create', inputA.key));
      expect(await reconcile.result()).toMatchObject({ outcome: 'needs_review', checks: 2 });
      // The only effect at the provider is B's, and B's payment is B's alone.
      expect(effectsOf(b, 'create').map((e) => e.payment_id)).toEqual([viewB.providerPaymentId]);
    });
  });

  it('A’s create committed and its answer was lost, B’s came later: A’s reconcile adopts A’s own payment, not the newest', async () => {
    const b = await t.world({ noKeys: true });
    await b.run(async () => {
      const { a: inputA, b: inputB } = twoMerchants(b);
      loseCreateOf(b, inputA, 'commit_then_drop');
      const { handle: handleA, view: firstA } = await startCharge(b, inputA);
      expect(firstA.status).toBe('unknown');
      const mine = effectsOf(b, 'create')[0]?.payment_id;
      await b.sim.advanceClock(5); // B's payment is strictly the newest of the order
      const { view: viewB } = await startCharge(b, inputB);
      expect(viewB.status).toBe('succeeded');

      await t.env.sleep('61 minutes');
      const found = await waitForStatus(handleA, 'succeeded');
      expect(found.providerPaymentId).toBe(mine);
      expect(found.providerPaymentId).not.toBe(viewB.providerPaymentId);
    });
  });

  it('B’s event, signalled to A’s workflow while A knows no provider payment, is not applied', async () => {
    const b = await t.world({ noKeys: true });
    await b.run(async () => {
      const { a: inputA, b: inputB } = twoMerchants(b);
      loseCreateOf(b, inputA, 'reset_before_commit');
      const { handle: handleA } = await startCharge(b, inputA);
      const { view: viewB } = await startCharge(b, inputB);
      const paymentB = await b.provider.getPayment(viewB.providerPaymentId as string);
      if (!paymentB) throw new Error('simulator lost B’s payment');
      expect(paymentB.metadata).toEqual({ merchant_id: inputB.merchantId, payment_key: inputB.key });

      await handleA.signal(webhookSignal, {
        eventId: 'evt_b',
        type: 'payment.succeeded',
        created: paymentB.created,
        payment: paymentB,
      });
      await handledSignal(handleA.workflowId, 'providerEvent');
      const after = await handleA.query(paymentQuery);
      expect(after.status).toBe('unknown');
      expect(after.providerPaymentId).toBeUndefined();
      const reconcile = t.env.client.workflow.getHandle(reconcileWorkflowId(inputA.merchantId, 'create', inputA.key));
      const history = await reconcile.fetchHistory();
      expect(
        history.events?.filter((e) => e.workflowExecutionSignaledEventAttributes?.signalName === 'reconcileResolved'),
      ).toHaveLength(0);
    });
  });
});
