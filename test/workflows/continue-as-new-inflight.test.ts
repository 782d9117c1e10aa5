/**
 * Continue-as-new while a refund's outcome is being reconciled. The reconcile is a child of the payment's run, and a
 * child goes with its run (parent close policy TERMINATE): a payment that continued as new here would kill the only
 * thing checking whether the refund happened, and the carried operation would stay `running` forever. So the payment
 * continues as new only once the reconcile ended. Runs on a dev server of its own whose suggestion threshold is tiny.
 */
import { type WorkflowHandle, WorkflowNotFoundError } from '@temporalio/client';
import { ensureReconcileSignal, paymentQuery, webhookSignal } from '../../src/domain/definitions';
import { reconcileWorkflowId } from '../../src/domain/ids';
import { startDevServer } from '../../scripts/lib/dev-server';
import { serverPerFile } from '../helpers/world';
import { eventually } from '../helpers/eventually';
import { chargeRequest } from '../helpers/payments';
import { refund } from '../helpers/requests';
import { effectsOf, recordHistories, startCharge } from '../helpers/workflows';

const t = serverPerFile(() =>
  startDevServer({
    extraArgs: ['--dynamic-config-value', 'limit.historyCount.suggestContinueAsNew=40'],
  }),
);

const HOUR = 3_600_000;

/** Workflow tasks of the current run that the server started with the continue-as-new suggestion, and completed. */
async function suggestedTasksCompleted(handle: WorkflowHandle): Promise<number> {
  const events = (await handle.fetchHistory()).events ?? [];
  let completed = 0;
  let suggested = false;
  for (const e of events) {
    if (e.workflowTaskStartedEventAttributes)
      suggested = e.workflowTaskStartedEventAttributes.suggestContinueAsNew === true;
    if (e.workflowTaskCompletedEventAttributes && suggested) completed += 1;
  }
  return completed;
}

it('does not continue as new while a refund’s reconcile runs; continues as new once it ended, the refund found', async () => {
  const b = await t.world();
  await b.run(async () => {
    const input = b.input(chargeRequest(), {
      // The reconcile's own checks are an hour away: the webhook below is what ends it.
      timings: { reconcileScheduleMs: [HOUR, HOUR] },
      retry: {
        refund: {
          initialIntervalMs: 100,
          maximumIntervalMs: 200,
          attemptTimeoutMs: 7_000,
          budgetMs: 15_000,
          maximumAttempts: 2,
        },
      },
    });
    const { handle, view } = await startCharge(b, input);
    expect(view.status).toBe('succeeded');
    // The refund commits at the provider, but every answer is lost: outcome unknown, a reconcile child checks.
    b.sim.addFaults({ rules: [{ match: { operation: 'refund' }, fault: 'commit_then_drop' }] });
    const answered = await refund(handle, { refundKey: 'r-inflight', fingerprint: 'f', amount: 400 });
    expect(answered.operations).toEqual([expect.objectContaining({ kind: 'refund', state: 'running' })]);
    const reconcile = t.env.client.workflow.getHandle(reconcileWorkflowId(input.merchantId, 'refund', 'r-inflight'));
    // The reconcile child starts beside the request's answer, so right after the answer it may not exist yet.
    await eventually(
      'the refund reconcile running',
      async () => {
        const described = await reconcile.describe().catch((err: unknown) => {
          if (err instanceof WorkflowNotFoundError) return undefined;
          throw err;
        });
        return described?.status.name === 'RUNNING';
      },
      20_000,
      100,
    );
    const runBefore = (await handle.describe()).runId;

    // Signals that change nothing grow the history past the threshold: the server now suggests continue-as-new.
    for (let i = 0; i < 15; i++) await handle.signal(ensureReconcileSignal);
    const firstRun = t.env.client.workflow.getHandle(handle.workflowId, runBefore);
    await eventually(
      'a workflow task that saw the suggestion completed',
      async () => (await suggestedTasksCompleted(firstRun)) > 0,
      20_000,
      100,
    );
    // That task completed without continuing as new: same run, and the reconcile still runs.
    expect((await reconcile.describe()).status.name).toBe('RUNNING');
    const during = await handle.describe();
    expect(during.status.name).toBe('RUNNING');
    expect(during.runId).toBe(runBefore);
    expect((await handle.query(paymentQuery)).operations).toEqual([
      expect.objectContaining({ kind: 'refund', state: 'running' }),
    ]);

    // The provider's webhook tells the payment what the refund did; the reconcile ends found, then the payment
    // continues as new.
    const payment = await b.provider.getPayment(view.providerPaymentId as string);
    if (!payment) throw new Error('simulator lost the payment');
    expect(payment.amountRefunded).toBe(400);
    await handle.signal(webhookSignal, {
      eventId: 'evt_refund',
      type: 'refund.succeeded',
      created: payment.created,
      payment,
    });
    expect(await reconcile.result()).toMatchObject({ outcome: 'found', via: 'webhook' });
    expect((await reconcile.describe()).status.name).toBe('COMPLETED');
    const runAfter = await eventually(
      'a new run',
      async () => {
        const d = await t.env.client.workflow.getHandle(handle.workflowId).describe();
        return d.runId !== runBefore && d.runId;
      },
      20_000,
      100,
    );
    const latest = t.env.client.workflow.getHandle(handle.workflowId, runAfter);
    const after = await latest.query(paymentQuery);
    expect(after).toMatchObject({ status: 'succeeded', amountCaptured: 1_000, amountRefunded: 400 });
    expect(after.operations).toEqual([
      expect.objectContaining({ kind: 'refund', key: 'r-inflight', state: 'succeeded' }),
    ]);
    expect(effectsOf(b, 'refund')).toHaveLength(1);
    // The run that waited for the cancelled reconcile before it continued as new (its patch marker included).
    await recordHistories(t, 'refund-news-before-continue-as-new', [handle.workflowId], runBefore);
  });
});
