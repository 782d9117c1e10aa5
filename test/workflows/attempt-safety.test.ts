/**
 * Attempt safety on the dev server in real time, against the real simulator over HTTP: one activity attempt never
 * outlives its timeout with a request still to send (defect 7), and a definite 4xx after an attempt whose outcome was
 * unknown does not mark the payment failed (defect 9).
 */
import { temporal } from '@temporalio/proto';
import { ErrorType } from '../../src/domain/errors';
import { type World, serverPerFile } from '../helpers/world';
import { eventually } from '../helpers/eventually';
import { chargeRequest } from '../helpers/payments';
import { effectsOf, requestsOf, startCharge, waitForStatus } from '../helpers/workflows';
import { paymentQuery } from '../../src/domain/definitions';

const t = serverPerFile();

it('no keys, a 503 then 9 s latency on lookups and creates, short attempt timeouts: exactly one create effect', async () => {
  // An HTTP deadline (12 s) that lets a 9 s call answer, and an attempt timeout (5 s) shorter than one call: before
  // the fix the attempt was cut off mid-lookup while its create still went out, and the next attempt's lookup (also
  // 9 s) missed it and charged again.
  const b = await t.world({ noKeys: true, totalTimeoutMs: 12_000 });
  await b.run(async () => {
    const input = b.input(chargeRequest(), {
      retry: {
        create: { attemptTimeoutMs: 5_000, budgetMs: 300_000, initialIntervalMs: 100, maximumIntervalMs: 500 },
      },
      timings: { reconcileScheduleMs: [600_000] },
    });
    const reference = input.request.orderId;
    b.sim.addFaults({
      rules: [
        { match: { operation: 'create', reference }, fault: 'status', status: 503, times: 1 },
        { match: { reference }, fault: 'latency', latency_ms: 9_000 },
      ],
    });
    const { handle } = await startCharge(b, input);
    // Until the payment settles, or a second charge shows that it never will be right.
    const { view } = await eventually(
      'a settled payment or a second create effect',
      async () => {
        const s = { view: await handle.query(paymentQuery), effects: effectsOf(b, 'create').length };
        return (s.view.status !== 'pending' || s.effects > 1) && s;
      },
      90_000,
      200,
    );
    // Every create that went out has been answered (an orphan still in the simulator would be a later effect).
    await eventually(
      'every create answered',
      () => requestsOf(b, 'create').every((r) => r.status !== null),
      30_000,
      200,
    );
    expect(effectsOf(b, 'create')).toHaveLength(1);
    expect(requestsOf(b, 'create').map((r) => r.status)).toEqual([503, 200]);
    expect(view.status).toBe('succeeded');
  });
}, 150_000);

/** The failures of the createPayment attempts the server recorded (the last one: the activity's final failure). */
async function createFailures(b: World, workflowId: string) {
  const history = await b.env.client.workflow.getHandle(workflowId).fetchHistory();
  const { EventType } = temporal.api.enums.v1;
  const failures: { type?: string | null; nonRetryable?: boolean | null; details: unknown }[] = [];
  for (const e of history.events ?? []) {
    if (e.eventType === EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED) {
      const f = e.activityTaskFailedEventAttributes?.failure;
      const app = f?.cause?.applicationFailureInfo ?? f?.applicationFailureInfo;
      const payload = app?.details?.payloads?.[0]?.data;
      failures.push({
        type: app?.type,
        nonRetryable: app?.nonRetryable,
        details: payload ? (JSON.parse(Buffer.from(payload).toString('utf8')) as unknown) : undefined,
      });
    }
  }
  return failures;
}

it('keys honoured: a 500 (unknown) then a 401 on the retry: the payment is unknown and reconciles, never failed', async () => {
  const b = await t.world({ totalTimeoutMs: 2_000 });
  await b.run(async () => {
    const input = b.input(chargeRequest(), {
      retry: { create: { initialIntervalMs: 100, maximumIntervalMs: 200 } },
      timings: { reconcileScheduleMs: [600_000] },
    });
    const reference = input.request.orderId;
    b.sim.addFaults({
      rules: [
        { match: { operation: 'create', reference }, fault: 'status', status: 500, times: 1 },
        { match: { operation: 'create', reference }, fault: 'status', status: 401, times: 1 },
      ],
    });
    const { handle } = await startCharge(b, input);
    const view = await waitForStatus(handle, 'unknown', 20_000);
    expect(view.status).toBe('unknown');
    expect(requestsOf(b, 'create').map((r) => r.status)).toEqual([500, 401]);
    // The retry knew (from the first attempt's heartbeat details) that an earlier outcome was unknown, so the 401
    // became a non-retryable OutcomeUnknown for the workflow to reconcile.
    const failures = await createFailures(b, handle.workflowId);
    // Only the final failure is in the history (retries happen on the server); its details say what the attempts did.
    expect(failures).toEqual([
      {
        type: ErrorType.OutcomeUnknown,
        nonRetryable: true,
        details: expect.objectContaining({
          attempt: 2,
          reason: 'rejected_after_unknown',
          status: 401,
          everSent: true,
          everUnknown: true,
          // Attempt 1 closed its record: its failure carried its last heartbeat to attempt 2 through the server.
          earlier: { everSent: true, everUnknown: true, inFlight: false, sends: 1, closedBy: 1 },
          sends: 2,
        }),
      },
    ]);
    expect(effectsOf(b, 'create')).toHaveLength(0);
  });
});
