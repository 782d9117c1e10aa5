/**
 * The reconcile sweep's attribution of provider payments found by reference, on the run's shared dev server
 * (visibility), against the real simulator: all merchants share one provider account, so a provider payment of an
 * order is not ours just because one payment of ours has that order id.
 */
import { randomUUID } from 'node:crypto';
import { type ReviewItemState, reviewItemQuery, reviewItemWorkflowId } from '../../src/domain/review-items';
import { type SweepResult, SweepInput } from '../../src/domain/sweep';
import type { ProviderPayment } from '../../src/providers/types';
import type { reconcileSweepWorkflow } from '../../src/workflows/sweep';
import { type World, serverPerFile } from '../helpers/world';
import { eventually } from '../helpers/eventually';
import { chargeRequest } from '../helpers/payments';
import { connectDevServer } from '../helpers/servers';
import { startCharge, waitForStatus } from '../helpers/workflows';

// The workers register the sweep's activities, as the worker process does.
const t = serverPerFile(connectDevServer, { sweep: true });

/** One sweep run over the window since `fromMs`, a threshold long enough that nothing of ours counts as stuck. */
async function runSweep(b: World, fromMs: number): Promise<SweepResult> {
  const workflowId = `sweep-test:${randomUUID()}`;
  b.track(workflowId);
  const result = await t.env.client.workflow.execute<typeof reconcileSweepWorkflow>('reconcileSweepWorkflow', {
    workflowId,
    taskQueue: b.taskQueue,
    args: [
      SweepInput.parse({
        providers: ['simulator'],
        intervalMs: 3_600_000,
        lookbackMs: 0,
        unknownThresholdMs: 3_600_000,
        window: { fromMs: fromMs - 2_000, toMs: Date.now() + 2_000 },
      }),
    ],
  });
  for (const id of result.reviewItems) b.track(id);
  return result;
}

/** Waits (bounded) until visibility lists the charge workflow: the sweep finds candidates by reference through it. */
async function indexed(b: World, workflowId: string, status: string): Promise<void> {
  await eventually(
    `${workflowId} indexed as ${status}`,
    async () => {
      const { executions } = await t.env.client.workflowService.listWorkflowExecutions({
        namespace: t.env.namespace ?? 'default',
        query: `TaskQueue = '${b.taskQueue}' AND PaymentStatus = '${status}'`,
        pageSize: 10,
      });
      return executions.some((e) => e.execution?.workflowId === workflowId);
    },
    10_000,
    100,
  );
}

/** A payment at the provider (on the world's api key, shared by all merchants) that no workflow of ours started. */
async function createAtProvider(
  b: World,
  reference: string,
  amount: number,
  metadata?: Record<string, string>,
): Promise<ProviderPayment> {
  const result = await b.provider.createPayment(
    {
      amount,
      currency: 'EUR',
      reference,
      paymentMethod: 'pm_card_visa',
      capture: 'automatic',
      ...(metadata ? { metadata } : {}),
    },
    { idempotencyKey: `direct_${randomUUID()}`, attempt: 1 },
  );
  if (result.outcome === 'declined') throw new Error('the direct charge was declined');
  return result.payment;
}

describe('reconcile sweep: attribution by reference, two merchants on one provider account', () => {
  it('a payment whose metadata names merchant B is an orphan, not attributed to A’s unknown payment of the same order and amount', async () => {
    const b = await t.world({ noKeys: true });
    const fromMs = Date.now();
    await b.run(async () => {
      const inputA = b.input(chargeRequest(), { timings: { reconcileScheduleMs: [600_000] } });
      b.sim.addFaults({
        rules: [{ match: { operation: 'create', reference: inputA.request.orderId }, fault: 'reset_before_commit' }],
      });
      const { handle } = await startCharge(b, inputA);
      await waitForStatus(handle, 'unknown');
      await indexed(b, handle.workflowId, 'unknown');
      b.sim.clearFaults();
      const merchantB = `${b.merchantId}_b`;
      const theirs = await createAtProvider(b, inputA.request.orderId, inputA.request.amount.value, {
        merchant_id: merchantB,
      });

      const result = await runSweep(b, fromMs);

      expect(result).toMatchObject({ providerPaymentsChecked: 1, orphans: 1, disagreements: 0, reviewItemsStarted: 1 });
      const item: ReviewItemState = await t.env.client.workflow
        .getHandle(reviewItemWorkflowId('simulator', theirs.id))
        .query(reviewItemQuery);
      expect(item.input).toMatchObject({ kind: 'orphan', orphanReason: 'unmatched', merchantId: merchantB });
      expect(item.input.ours).toBeUndefined();
    });
  });

  it('a payment without metadata is not attributed to the only payment of its order when that one records another', async () => {
    const b = await t.world();
    const fromMs = Date.now();
    await b.run(async () => {
      const inputA = b.input(chargeRequest());
      const { handle, view } = await startCharge(b, inputA);
      expect(view.status).toBe('succeeded');
      await indexed(b, handle.workflowId, 'succeeded');
      // Another integration on the shared account charges the same order id: nothing says it is A's second charge.
      const stranger = await createAtProvider(b, inputA.request.orderId, 4_200);

      const result = await runSweep(b, fromMs);

      expect(result).toMatchObject({ providerPaymentsChecked: 2, orphans: 1, reviewItemsStarted: 1 });
      const item: ReviewItemState = await t.env.client.workflow
        .getHandle(reviewItemWorkflowId('simulator', stranger.id))
        .query(reviewItemQuery);
      expect(item.input).toMatchObject({ kind: 'orphan', orphanReason: 'unmatched' });
      expect(item.input.merchantId).toBeUndefined();
      expect(item.input.ours).toBeUndefined();
    });
  });
});
