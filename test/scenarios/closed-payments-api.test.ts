/**
 * A repeat `POST /v1/payments` for a payment whose workflow has closed: declined, failed (provider 4xx), voided after
 * the authorization expired, and past the refund window. The closed run is never started again under its key
 * (REJECT_DUPLICATE): the client compares the memo's fingerprint and answers the first final answer. Real API, real client,
 * real workers and simulator, on the run's shared dev server; the authorization and the refund window last seconds.
 */
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { chargeWorkflowId } from '../../src/domain/ids';
import type { PaymentView } from '../../src/domain/payment';
import { connectDevServer } from '../helpers/servers';
import { type ApiWorld, chargeBody, newKey, startWorld } from '../helpers/world';
import { eventually } from '../helpers/eventually';

let env: TestWorkflowEnvironment;
let h: ApiWorld;

beforeAll(async () => {
  env = await connectDevServer();
  h = await startWorld(env, { api: true, timings: { authorizationExpiryMs: 3_000, refundWindowMs: 3_000 } });
}, 60_000);

afterAll(async () => {
  await h?.close();
  await env?.teardown();
});

const createRequests = (reference: string) =>
  h.ledger().requests.filter((r) => r.operation === 'create' && r.reference === reference);

/** Runs of one workflow id, open and closed, as visibility lists them. */
async function runsOf(workflowId: string): Promise<number> {
  let n = 0;
  for await (const _ of env.client.workflow.list({ query: `WorkflowId = '${workflowId}'` })) n += 1;
  return n;
}

type Scenario = readonly [
  what: string,
  body: () => Record<string, unknown>,
  prepare: (body: Record<string, unknown>) => void,
  first: Partial<PaymentView>,
  closed: Partial<PaymentView>,
];

const scenarios: Scenario[] = [
  [
    'declined',
    () => chargeBody({ paymentMethod: 'pm_decline_card' }),
    () => undefined,
    { status: 'declined', declineCode: 'card' },
    { status: 'declined', amountAuthorized: 0 },
  ],
  [
    'failed (the provider answered 400)',
    () => chargeBody(),
    (body) =>
      h.sim.addFaults({
        rules: [
          { match: { operation: 'create', reference: body.orderId as string }, fault: 'status', status: 400, times: 1 },
        ],
      }),
    { status: 'failed' },
    { status: 'failed', amountAuthorized: 0 },
  ],
  [
    'voided after the authorization expired',
    () => chargeBody({ capture: 'manual' }),
    () => undefined,
    { status: 'authorized', amountAuthorized: 1_000 },
    { status: 'voided', amountAuthorized: 1_000, amountCaptured: 0 },
  ],
  [
    'past the refund window',
    () => chargeBody(),
    () => undefined,
    { status: 'succeeded', amountCaptured: 1_000 },
    { status: 'succeeded', amountCaptured: 1_000, amountRefunded: 0 },
  ],
];

describe('a repeat POST /v1/payments for a closed payment', () => {
  it.each(scenarios)(
    '%s: its first answer with Idempotent-Replayed (not the closed run’s result), another body is 422, nothing sent to the provider',
    async (_what, makeBody, prepare, firstView, closedView) => {
      const key = newKey();
      const body = makeBody();
      prepare(body);
      const first = await h.request('POST', '/v1/payments', { key, body });
      expect(first.status).toBe(200);
      expect(first.body).toMatchObject(firstView);

      const handle = env.client.workflow.getHandle(chargeWorkflowId(h.a.id, key));
      const stored = await eventually(
        'the payment workflow closed',
        async () => (await handle.describe()).status.name === 'COMPLETED' && handle.result(),
        20_000,
      );
      expect(stored).toMatchObject(closedView);
      const sent = createRequests(body.orderId as string).length;
      expect(sent).toBe(1);

      const repeat = await h.request('POST', '/v1/payments', { key, body });
      expect(repeat.status).toBe(200);
      expect(repeat.headers.get('idempotent-replayed')).toBe('true');
      // The first final answer, as first answered: for a voided payment `authorized`, not the closed result.
      expect(repeat.body).toEqual(first.body);

      const reused = await h.request('POST', '/v1/payments', {
        key,
        body: { ...body, amount: { value: 2_000, currency: 'EUR' } },
      });
      expect(reused.status).toBe(422);
      expect(reused.body.error?.type).toBe('idempotency_key_reused');

      // Never charged again under its key: no new provider request, one run of the workflow id.
      expect(createRequests(body.orderId as string)).toHaveLength(sent);
      await eventually('one run in visibility', async () => (await runsOf(handle.workflowId)) === 1);
    },
  );

  it('past the refund window a refund is 409 invalid_transition, with no refund request', async () => {
    const key = newKey();
    const body = chargeBody();
    expect((await h.request('POST', '/v1/payments', { key, body })).status).toBe(200);
    const handle = env.client.workflow.getHandle(chargeWorkflowId(h.a.id, key));
    await eventually('the payment workflow closed', async () => (await handle.describe()).status.name === 'COMPLETED');

    const refund = await h.request('POST', `/v1/payments/${key}/refunds`, { key: newKey(), body: { amount: 100 } });

    expect(refund.status).toBe(409);
    expect(refund.body.error?.type).toBe('invalid_transition');
    expect(h.ledger().requests.filter((r) => r.operation === 'refund' && r.reference === body.orderId)).toEqual([]);
  });
});
