/**
 * Key records (issue 23 §4, docs/operations.md#key-records) through the real stack: the run's dev server, PostgreSQL,
 * the API and the simulator. A payment hands its keys' first final answers to `key_records`; once its workflow is gone
 * (deleted here, as the namespace retention deletes it) a repeat of a key replays the record and starts nothing, and
 * another body under it is 422.
 */
import { WorkflowNotFoundError } from '@temporalio/client';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { captureWorkflowId, chargeWorkflowId, refundWorkflowId } from '../../src/domain/ids';
import pg from 'pg';
import { PaymentsClient } from '../../src/client';
import { isDatabaseError } from '../../src/db';
import { KeyRecords } from '../../src/key-records';
import { openTestDatabase } from '../helpers/database';
import { connectDevServer } from '../helpers/servers';
import { recordHistories } from '../helpers/workflows';
import { type ApiWorld, chargeBody, newKey, startWorld, testTimings } from '../helpers/world';
import { eventually } from '../helpers/eventually';

let env: TestWorkflowEnvironment;
let db: Awaited<ReturnType<typeof openTestDatabase>>;
let h: ApiWorld;

beforeAll(async () => {
  env = await connectDevServer();
  db = await openTestDatabase();
  // A short refund window: the captured payment closes seconds after its refund, as a real one closes after 30 days.
  h = await startWorld(env, { api: true, keyRecords: new KeyRecords(db.pool), timings: { refundWindowMs: 4_000 } });
});
afterAll(async () => {
  await h?.close();
  await db?.drop();
  await env?.teardown();
});

/** The requests the provider saw for this world's api key, over `GET /_sim/ledger` as an operator would read them. */
async function providerRequests(): Promise<{ operation: string; reference?: string }[]> {
  const res = await fetch(`${h.sim.url}/_sim/ledger?api_key=${encodeURIComponent(h.apiKey)}`);
  return ((await res.json()) as { requests: { operation: string; reference?: string }[] }).requests;
}

const recordOf = async (scope: string) =>
  (await db.pool.query<{ fingerprint: string; view: unknown }>('SELECT * FROM key_records WHERE scope = $1', [scope]))
    .rows[0];

/** Waits for the workflow to close (its handoffs done). */
async function closed(workflowId: string): Promise<void> {
  const handle = env.client.workflow.getHandle(workflowId);
  await eventually('the workflow closed', async () => (await handle.describe()).status.name !== 'RUNNING', 30_000);
}

/** Deletes a closed workflow as the namespace retention would, and waits until Temporal no longer has it. */
async function deleteAsRetentionWould(workflowId: string): Promise<void> {
  await closed(workflowId);
  await deleteWorkflow(workflowId);
}

/** Deletes a workflow (a running one is terminated first, as `temporal workflow delete` does) until it is gone. */
async function deleteWorkflow(workflowId: string): Promise<void> {
  await env.client.workflowService.deleteWorkflowExecution({
    namespace: env.namespace ?? 'default',
    workflowExecution: { workflowId },
  });
  await eventually(
    'the workflow gone',
    async () => {
      try {
        await env.client.workflow.getHandle(workflowId).describe();
        return false;
      } catch (err) {
        return err instanceof WorkflowNotFoundError;
      }
    },
    60_000,
  ); // the server deletes in the background: within seconds on the run's dev server (test/global-setup.ts)
}

/** Temporal has no workflow under this id: nothing was started. */
async function expectNoWorkflow(workflowId: string): Promise<void> {
  await expect(env.client.workflow.getHandle(workflowId).describe()).rejects.toBeInstanceOf(WorkflowNotFoundError);
}

it('a declined payment’s workflow deleted: its key replays the stored decline without a provider request; another body 422', async () => {
  const key = newKey();
  const body = chargeBody({ paymentMethod: 'pm_decline_insufficient_funds' });
  const first = await h.request('POST', '/v1/payments', { key, body });
  expect(first.body).toMatchObject({ status: 'declined', declineCode: 'insufficient_funds' });
  const workflowId = chargeWorkflowId(h.a.id, key);
  await eventually('the decline recorded', async () => (await recordOf(workflowId)) !== undefined);
  expect((await recordOf(workflowId))?.view).toEqual(first.body);
  await closed(workflowId);
  await recordHistories({ env }, 'key-records-declined', [workflowId]);
  await deleteAsRetentionWould(workflowId);
  const before = await providerRequests();

  const repeat = await h.request('POST', '/v1/payments', { key, body });
  expect(repeat.status).toBe(first.status);
  expect(repeat.headers.get('idempotent-replayed')).toBe('true');
  expect(repeat.body).toEqual(first.body);
  const other = await h.request('POST', '/v1/payments', {
    key,
    body: { ...body, amount: { value: 999, currency: 'EUR' } },
  });
  expect(other.status).toBe(422);
  expect(other.body.error?.type).toBe('idempotency_key_reused');

  await expectNoWorkflow(workflowId);
  expect(await providerRequests()).toEqual(before);
}, 90_000);

it('a capture’s and a refund’s keys replay their records once the payment is gone; another body 422', async () => {
  const key = newKey();
  const body = chargeBody({ capture: 'manual' });
  expect((await h.request('POST', '/v1/payments', { key, body })).body.status).toBe('authorized');
  const captureKey = newKey();
  const refundKey = newKey();
  const captured = await h.request('POST', `/v1/payments/${key}/capture`, { key: captureKey, body: {} });
  expect(captured.status).toBe(200);
  const refundBody = { amount: 400 };
  const refunded = await h.request('POST', `/v1/payments/${key}/refunds`, { key: refundKey, body: refundBody });
  expect(refunded.status).toBe(200);
  const workflowId = chargeWorkflowId(h.a.id, key);
  await eventually(
    'both recorded',
    async () =>
      (await recordOf(`capture:${h.a.id}:${captureKey}`)) !== undefined &&
      (await recordOf(`refund:${h.a.id}:${refundKey}`)) !== undefined,
  );
  await closed(workflowId);
  await recordHistories({ env }, 'key-records-capture-refund', [workflowId]);
  await deleteAsRetentionWould(workflowId);
  for (const child of [captureWorkflowId(h.a.id, captureKey), refundWorkflowId(h.a.id, refundKey)]) {
    await deleteAsRetentionWould(child).catch(() => undefined); // the children, where the payment ran any
  }
  const before = await providerRequests();

  const capture = await h.request('POST', `/v1/payments/${key}/capture`, { key: captureKey, body: {} });
  expect(capture.status).toBe(200);
  expect(capture.headers.get('idempotent-replayed')).toBe('true');
  expect(capture.body).toEqual(captured.body);
  const refund = await h.request('POST', `/v1/payments/${key}/refunds`, { key: refundKey, body: refundBody });
  expect(refund.status).toBe(200);
  expect(refund.headers.get('idempotent-replayed')).toBe('true');
  expect(refund.body).toEqual(refunded.body);
  const other = await h.request('POST', `/v1/payments/${key}/refunds`, { key: refundKey, body: { amount: 300 } });
  expect(other.status).toBe(422);
  expect(other.body.error?.type).toBe('idempotency_key_reused');

  await expectNoWorkflow(workflowId);
  expect(await providerRequests()).toEqual(before);
}, 90_000);

it('a capture the provider refused, its payment deleted while open: the key replays the 422 provider_rejected', async () => {
  const key = newKey();
  const body = chargeBody({ capture: 'manual' });
  expect((await h.request('POST', '/v1/payments', { key, body })).body.status).toBe('authorized');
  h.sim.addFaults({
    rules: [
      { match: { operation: 'capture', reference: body.orderId as string }, fault: 'status', status: 400, times: 1 },
    ],
  });
  const captureKey = newKey();
  const refused = await h.request('POST', `/v1/payments/${key}/capture`, { key: captureKey, body: {} });
  expect({ status: refused.status, type: refused.body.error?.type }).toEqual({
    status: 422,
    type: 'provider_rejected',
  });
  await eventually(
    'the refusal recorded',
    async () => (await recordOf(`capture:${h.a.id}:${captureKey}`)) !== undefined,
  );
  const workflowId = chargeWorkflowId(h.a.id, key);
  await recordHistories({ env }, 'key-records-capture-refused', [workflowId]);
  await deleteWorkflow(workflowId);
  const before = await providerRequests();

  const repeat = await h.request('POST', `/v1/payments/${key}/capture`, { key: captureKey, body: {} });
  expect(repeat.status).toBe(422);
  expect(repeat.headers.get('idempotent-replayed')).toBe('true');
  expect(repeat.body).toEqual(refused.body);
  const other = await h.request('POST', `/v1/payments/${key}/capture`, { key: captureKey, body: { amount: 500 } });
  expect(other.status).toBe(422);
  expect(other.body.error?.type).toBe('idempotency_key_reused');

  await expectNoWorkflow(workflowId);
  expect(await providerRequests()).toEqual(before);
}, 90_000);

it('the table unreachable: a charge is refused as a database failure (the API’s 503) and starts nothing', async () => {
  // Nothing listens on port 1: every connection is refused at once.
  const unreachable = new pg.Pool({ connectionString: 'postgres://postgres@127.0.0.1:1/payments' });
  const client = new PaymentsClient(env.client, {
    taskQueue: h.taskQueue,
    timings: testTimings,
    keyRecords: new KeyRecords(unreachable),
  });
  const key = newKey();
  try {
    const refused = await client.charge(h.a.id, key, chargeBody()).then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(isDatabaseError(refused)).toBe(true);
    await expectNoWorkflow(chargeWorkflowId(h.a.id, key));
  } finally {
    await unreachable.end();
  }
});
