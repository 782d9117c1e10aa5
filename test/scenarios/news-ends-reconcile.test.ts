/**
 * Provider news ends a reconcile whose question it answers, through the real stack (API, workers, simulator with
 * webhooks to the API, the run's dev server): a refund whose answer is lost while every look-up fails (an outage of
 * reads) is shown by its webhook before its reconcile starts; the operation settles at once and the reconcile is
 * cancelled (or never started), instead of checking on its schedule through the outage with the operation `running` (found by the money
 * model, seed 447752219: "stuck 7: ... refund running").
 */
import { WorkflowNotFoundError } from '@temporalio/client';
import { defaultPayloadConverter } from '@temporalio/common';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { chargeWorkflowId, reconcileWorkflowId } from '../../src/domain/ids';
import type { PaymentView } from '../../src/domain/payment';
import { connectDevServer } from '../helpers/servers';
import { recordHistories } from '../helpers/workflows';
import { type ApiWorld, chargeBody, newKey, startWorld, testRetry, testTimings } from '../helpers/world';
import { eventually } from '../helpers/eventually';

let env: TestWorkflowEnvironment;
let h: ApiWorld;

beforeAll(async () => {
  env = await connectDevServer();
  h = await startWorld(env, {
    api: true,
    // The reconcile's first look-up comes after 60 s: only the webhook can settle the refund within the test.
    timings: testTimings,
    // Two refund attempts, both answers lost: the refund's outcome is unknown within a second.
    retry: { ...testRetry, refund: { initialIntervalMs: 100, maximumIntervalMs: 200, maximumAttempts: 2 } },
  });
}, 60_000);

afterEach(() => h?.sim.clearFaults());

afterAll(async () => {
  await h?.close();
  await env?.teardown();
});

const viewOf = async (key: string) => (await h.request('GET', `/v1/payments/${key}`)).body as unknown as PaymentView;

it('a refund its webhook showed settles at once and its reconcile is cancelled, though every look-up fails', async () => {
  const key = newKey();
  const body = chargeBody();
  const orderId = body.orderId as string;
  expect((await h.request('POST', '/v1/payments', { key, body })).status).toBe(200);
  h.sim.addFaults({
    rules: [
      { match: { operation: 'refund', reference: orderId }, fault: 'commit_then_drop', times: 2 },
      { match: { operation: 'lookup', reference: orderId }, fault: 'status', status: 500, times: 1_000 },
    ],
  });
  const refundKey = newKey();
  const refund = await h.request('POST', `/v1/payments/${key}/refunds`, { key: refundKey, body: { amount: 400 } });
  // 200 when the news settled it within the request's wait (before: 202, the operation running until the look-ups
  // came back), else 202 and it settles below.
  expect([200, 202]).toContain(refund.status);

  const settled = await eventually(
    'the refund settled by its webhook',
    async () => {
      const v = await viewOf(key);
      return v.operations?.find((o) => o.key === refundKey)?.state === 'succeeded' ? v : undefined;
    },
    20_000,
  );
  expect(settled).toMatchObject({ status: 'succeeded', amountRefunded: 400 });
  // The look-ups still fail: only the news can have ended the reconcile, and it did not wait out its schedule.
  const reconcile = h.env.client.workflow.getHandle(reconcileWorkflowId(h.a.id, 'refund', refundKey));
  // Never started (the news came before it) or cancelled (the news came while it waited): never left running.
  await eventually('the refund’s reconcile not running', async () => {
    const status = await reconcile.describe().then(
      (d) => d.status.name,
      (err: unknown) => (err instanceof WorkflowNotFoundError ? 'never started' : Promise.reject(err)),
    );
    return status === 'CANCELLED' || status === 'never started' ? status : undefined;
  });
  const effects = (await h.ledger()).effects.filter((e) => e.reference === orderId && e.operation === 'refund');
  expect(effects).toHaveLength(1);
  // The answer repeats replay is the refund's own.
  const repeat = await h.request('POST', `/v1/payments/${key}/refunds`, { key: refundKey, body: { amount: 400 } });
  expect(repeat.status).toBe(200);
  expect(repeat.headers.get('idempotent-replayed')).toBe('true');
  // The API signalled the news with the time it took the webhook, which the payment stamps its change with.
  const history = await h.env.client.workflow.getHandle(chargeWorkflowId(h.a.id, key)).fetchHistory();
  const handlings = (history.events ?? []).flatMap((e) => {
    const signal = e.workflowExecutionSignaledEventAttributes;
    const handling = signal?.signalName === 'providerEvent' ? signal.input?.payloads?.[2] : undefined;
    return handling ? [defaultPayloadConverter.fromPayload<{ receivedAt?: string }>(handling)] : [];
  });
  expect(handlings.length).toBeGreaterThanOrEqual(1);
  for (const handling of handlings) expect(Date.parse(handling.receivedAt ?? '')).toBeGreaterThan(0);
  await recordHistories({ env }, 'refund-settled-by-news', [chargeWorkflowId(h.a.id, key)]);
});
