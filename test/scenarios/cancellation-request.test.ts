/**
 * A cancellation request (the web UI's "Request Cancellation", `temporal workflow cancel`, the client's
 * `handle.cancel()`) is handled by the payment: an authorization is voided at the provider and the payment ends
 * `voided`; where money moved or the outcome is still open, the request is refused and the payment keeps its life (the
 * refund window, the reconcile) and its status. The workflow never ends CANCELED with money held.
 *
 * Through the real stack on the dev server: the API, the workers, the simulator over HTTP. Webhooks are off so an
 * unknown outcome stays unknown until the reconcile's look-up finds it.
 */
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { temporal } from '@temporalio/proto';
import { chargeWorkflowId, reconcileWorkflowId } from '../../src/domain/ids';
import { connectDevServer } from '../helpers/servers';
import { recordHistories } from '../helpers/workflows';
import { type ApiWorld, chargeBody, newKey, startWorld, testTimings } from '../helpers/world';
import { eventually } from '../helpers/eventually';

const { WorkflowExecutionStatus, EventType } = temporal.api.enums.v1;

let env: TestWorkflowEnvironment;
let h: ApiWorld;

beforeAll(async () => {
  env = await connectDevServer();
  // The first reconcile look-up 4 s after the first send: long enough to request the cancellation while the payment is
  // unknown, short enough to see the reconcile settle it.
  h = await startWorld(env, {
    api: true,
    webhooks: false,
    timings: { ...testTimings, reconcileScheduleMs: [4_000, 4_000] },
  });
});
afterAll(async () => {
  await h?.close();
  await env?.teardown();
});

const handleOf = (key: string) => env.client.workflow.getHandle(chargeWorkflowId(h.a.id, key));
const statusOf = async (key: string) => (await h.request('GET', `/v1/payments/${key}`)).body.status;
const runStatus = async (key: string) => (await handleOf(key).describe()).raw.workflowExecutionInfo?.status;
const effects = async (orderId: string, operation: string) =>
  (await h.ledger()).effects.filter((e) => e.reference === orderId && e.operation === operation);

/** The cancellation request as the web UI sends it; resolves once Temporal recorded it in the payment's history. */
async function requestCancellation(key: string): Promise<void> {
  await handleOf(key).cancel();
  await eventually('the cancellation request in history', async () => {
    const history = await handleOf(key).fetchHistory();
    return history.events?.some((e) => e.eventType === EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCEL_REQUESTED);
  });
}

/** A charge whose every create attempt times out after it was sent (the simulator commits it 5 s later). */
async function slowCharge(orderId: string): Promise<string> {
  await h.sim.addFaults({
    rules: [{ match: { operation: 'create', reference: orderId }, fault: 'latency', latency_ms: 5_000 }],
  });
  const key = newKey();
  // Not awaited: the POST waits for the first call; the test acts on the payment meanwhile.
  void h.request('POST', '/v1/payments', { key, body: chargeBody({ orderId }) }).catch(() => undefined);
  return key;
}

it('voids an authorization at the provider: the payment ends voided, one void in the ledger, the run completed', async () => {
  const key = newKey();
  const body = chargeBody({ capture: 'manual' });
  expect((await h.request('POST', '/v1/payments', { key, body })).body.status).toBe('authorized');

  await requestCancellation(key);

  await eventually('the payment voided', async () => (await statusOf(key)) === 'voided', 20_000);
  await eventually(
    'the run completed',
    async () => (await runStatus(key)) === WorkflowExecutionStatus.WORKFLOW_EXECUTION_STATUS_COMPLETED,
  );
  const view = (await handleOf(key).result()) as { status: string; operations?: { kind: string; state: string }[] };
  expect(view.status).toBe('voided');
  expect(view.operations).toEqual([expect.objectContaining({ kind: 'void', state: 'succeeded' })]);
  expect(await effects(body.orderId as string, 'void')).toHaveLength(1);
  // The money is released: a capture is refused as on any voided payment, not "closed (cancelled)".
  const capture = await h.request('POST', `/v1/payments/${key}/capture`, { key: newKey(), body: { amount: 100 } });
  expect(capture.status).toBe(409);
  expect(await effects(body.orderId as string, 'capture')).toHaveLength(0);
  await recordHistories({ env }, 'cancel-request-voids-authorization', [chargeWorkflowId(h.a.id, key)]);
}, 60_000);

it('refuses it where money moved: a succeeded payment keeps its status and its refund window, a refund still works', async () => {
  const key = newKey();
  const body = chargeBody();
  expect((await h.request('POST', '/v1/payments', { key, body })).body.status).toBe('succeeded');

  await requestCancellation(key);

  // Give the payment the time to act on it (a wrong answer would show within this), then check it did not.
  const refund = await h.request('POST', `/v1/payments/${key}/refunds`, { key: newKey(), body: { amount: 400 } });
  expect(refund.status).toBe(200);
  expect(refund.body).toMatchObject({ status: 'succeeded', amountRefunded: 400 });
  expect(await runStatus(key)).toBe(WorkflowExecutionStatus.WORKFLOW_EXECUTION_STATUS_RUNNING);
  expect(await statusOf(key)).toBe('succeeded');
  expect(await effects(body.orderId as string, 'refund')).toHaveLength(1);
  expect(await effects(body.orderId as string, 'void')).toHaveLength(0);
}, 60_000);

it('refuses it while the outcome is unknown: the reconcile keeps running and settles the payment', async () => {
  const orderId = `order_${newKey()}`;
  const key = await slowCharge(orderId);
  await eventually('the payment unknown', async () => (await statusOf(key)) === 'unknown', 30_000);
  const reconcile = env.client.workflow.getHandle(reconcileWorkflowId(h.a.id, 'create', key));
  await eventually('the reconcile running', async () => reconcile.describe().then(() => true));

  await requestCancellation(key);

  // The reconcile's look-up finds the charge the provider committed: the payment settles, still open for refunds.
  await eventually('the payment settled by its reconcile', async () => (await statusOf(key)) === 'succeeded', 30_000);
  expect((await reconcile.describe()).raw.workflowExecutionInfo?.status).toBe(
    WorkflowExecutionStatus.WORKFLOW_EXECUTION_STATUS_COMPLETED,
  );
  expect(await runStatus(key)).toBe(WorkflowExecutionStatus.WORKFLOW_EXECUTION_STATUS_RUNNING);
  expect(await effects(orderId, 'create')).toHaveLength(1);
  expect(await effects(orderId, 'void')).toHaveLength(0);
}, 90_000);

it('decides a request sent while the first call is in flight once it settled: unknown, so it keeps reconciling', async () => {
  const orderId = `order_${newKey()}`;
  const key = await slowCharge(orderId);
  await eventually('the create in flight', async () => {
    const d = await handleOf(key).describe();
    return (d.raw.pendingActivities?.length ?? 0) > 0 || (await statusOf(key)) === 'pending';
  });
  expect(await statusOf(key)).toBe('pending');

  await requestCancellation(key);

  await eventually('the payment settled by its reconcile', async () => (await statusOf(key)) === 'succeeded', 45_000);
  expect(await runStatus(key)).toBe(WorkflowExecutionStatus.WORKFLOW_EXECUTION_STATUS_RUNNING);
  expect(await effects(orderId, 'create')).toHaveLength(1);
  expect(await effects(orderId, 'void')).toHaveLength(0);
}, 90_000);
