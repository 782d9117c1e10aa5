/**
 * `/v1/review-items` over the real API, PaymentsClient, simulator and workers (with the sweep's activities, as the
 * worker's `main()` registers them) on the run's shared dev server. Review items come from a real sweep run over
 * orphans created directly at the simulator; visibility is eventually consistent, so list reads poll with a deadline.
 */
import { randomUUID } from 'node:crypto';
import { WorkflowNotFoundError } from '@temporalio/client';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { ReviewItemList, ReviewItemView } from '../../src/domain/api-schemas';
import { reviewItemWorkflowId } from '../../src/domain/review-items';
import { SweepInput, type SweepResult } from '../../src/domain/sweep';
import type { reconcileSweepWorkflow } from '../../src/workflows/sweep';
import { connectDevServer } from '../helpers/servers';
import { type ApiWorld, type ApiResponse, startWorld } from '../helpers/world';
import { eventually } from '../helpers/eventually';
import { validateOpenApi } from './validate-openapi';

let env: TestWorkflowEnvironment;
let h: ApiWorld;
/** Review items this file raised; the ones still open are terminated at the end (they never complete by themselves). */
const raised = new Set<string>();

beforeAll(async () => {
  env = await connectDevServer();
  // No webhooks: the orphans' events would only park; review items come from the sweep.
  h = await startWorld(env, { api: true, webhooks: false, sweep: true });
}, 60_000);

afterAll(async () => {
  for (const id of raised) {
    await env?.client.workflow
      .getHandle(id)
      .terminate('test cleanup')
      .catch((err: unknown) => {
        if (!(err instanceof WorkflowNotFoundError)) throw err; // completed (resolved) already
      });
  }
  await h?.close();
  await env?.teardown();
});

/** Creates a payment at the simulator directly, as nothing of ours would: an effect no workflow started. */
async function orphanAtSimulator(metadata?: Record<string, string>): Promise<{ id: string; reference: string }> {
  const reference = `order_${randomUUID()}`;
  const res = await fetch(`${h.sim.url}/v1/payments`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${h.apiKey}`,
      'idempotency-key': `direct_${randomUUID()}`,
      'content-type': 'application/json',
    },
    body: JSON.stringify({
      amount: 1_234,
      currency: 'EUR',
      reference,
      payment_method: 'pm_card_visa',
      capture: 'automatic',
      ...(metadata === undefined ? {} : { metadata }),
    }),
  });
  if (res.status !== 200) throw new Error(`the simulator answered ${res.status}`);
  const payment = (await res.json()) as { id: string };
  return { id: payment.id, reference };
}

/** One sweep run, executed directly (no schedule) on the world's task queue over a window around the test. */
async function runSweep(fromMs: number): Promise<SweepResult> {
  const input = SweepInput.parse({
    providers: ['simulator'],
    intervalMs: 3_600_000,
    lookbackMs: 0,
    unknownThresholdMs: 3_600_000,
    // Provider times are whole seconds; the window's end is exclusive.
    window: { fromMs: fromMs - 2_000, toMs: Date.now() + 2_000 },
  });
  const result = await env.client.workflow.execute<typeof reconcileSweepWorkflow>('reconcileSweepWorkflow', {
    workflowId: `sweep-api-test:${randomUUID()}`,
    taskQueue: h.taskQueue,
    args: [input],
  });
  for (const id of result.reviewItems) raised.add(id);
  return result;
}

/** `GET /v1/review-items` as `token`, answer checked against the contract's schema. */
async function list(token: string, query = ''): Promise<ReviewItemList> {
  const res = await h.request('GET', `/v1/review-items${query}`, { token });
  expect(res.status).toBe(200);
  return ReviewItemList.parse(res.body);
}

/** Polls the list until it shows exactly `ids`. */
const listsExactly = (token: string, ids: string[], query = '') =>
  eventually(
    `GET /v1/review-items${query} to list ${JSON.stringify(ids)}`,
    async () => {
      const page = await list(token, query);
      const found = page.items.map((i) => i.id);
      return found.length === ids.length && ids.every((id) => found.includes(id)) && page;
    },
    20_000,
  );

const resolvePath = (id: string) => `/v1/review-items/${encodeURIComponent(id)}/resolve`;
const resolve = (id: string, token: string, body: unknown = { action: 'refunded_at_provider', note: 'refunded' }) =>
  h.request('POST', resolvePath(id), { token, body });

const expectError = (res: ApiResponse, status: number, type: string) => {
  expect({ status: res.status, type: res.body.error?.type }).toEqual({ status, type });
};

describe('/v1/review-items', () => {
  it('lists the sweep’s orphan to its merchant only, resolves it once (200, then 409) and drops it from the open list', async () => {
    const fromMs = Date.now();
    const mine = await orphanAtSimulator({ merchant_id: h.a.id, payment_key: 'never-started' });
    const operatorsOnly = await orphanAtSimulator(); // no metadata: no merchant to attribute it to
    const itemId = reviewItemWorkflowId('simulator', mine.id);
    const operatorItemId = reviewItemWorkflowId('simulator', operatorsOnly.id);

    const sweep = await runSweep(fromMs);
    expect(sweep).toMatchObject({ providerPaymentsChecked: 2, orphans: 2, reviewItemsStarted: 2 });
    expect([...sweep.reviewItems].sort()).toEqual([itemId, operatorItemId].sort());

    // Merchant A sees exactly its item, never the operator-only one.
    const page = await listsExactly(h.a.token, [itemId]);
    expect(page.nextPageToken).toBeUndefined();
    const item = ReviewItemView.parse(page.items[0]);
    expect(item).toMatchObject({
      id: itemId,
      merchantId: h.a.id,
      provider: 'simulator',
      providerPaymentId: mine.id,
      kind: 'orphan',
      orphanReason: 'unmatched',
      reference: mine.reference,
      amount: { value: 1_234, currency: 'EUR' },
      providerStatus: 'succeeded',
      paymentKey: 'never-started',
      status: 'open',
    });
    expect(item.payment).toBeUndefined();
    expect(item.resolution).toBeUndefined();
    expect(Date.parse(item.createdAt)).toBeGreaterThanOrEqual(fromMs - 1_000);
    // The operator-only item is indexed as well (so its absence above is the scoping, not lag): the web UI's filter.
    await eventually('the operator-only item in visibility', async () => {
      const r = await env.client.workflowService.listWorkflowExecutions({
        namespace: env.namespace ?? 'default',
        query: `WorkflowType = 'reviewItemWorkflow' AND PaymentStatus = 'needs_review' AND OrderId = '${operatorsOnly.reference}'`,
      });
      return r.executions.some((e) => e.execution?.workflowId === operatorItemId);
    });
    expect((await list(h.a.token)).items.map((i) => i.id)).toEqual([itemId]);
    expect((await list(h.a.token, '?open=false')).items.map((i) => i.id)).toEqual([itemId]);

    // Merchant B: an empty list, and 404 on resolve, exactly like a missing item.
    expect(await list(h.b.token)).toEqual({ items: [] });
    expect(await list(h.b.token, '?open=false')).toEqual({ items: [] });
    const foreign = await resolve(itemId, h.b.token);
    expectError(foreign, 404, 'not_found');
    const missing = await resolve(reviewItemWorkflowId('simulator', `pay_${randomUUID()}`), h.a.token);
    expect({ status: missing.status, body: missing.body }).toEqual({ status: 404, body: foreign.body });
    // No merchant owns the operator-only item: 404 for every merchant.
    expectError(await resolve(operatorItemId, h.a.token), 404, 'not_found');

    // Invalid bodies and ids: 400 with field errors, nothing resolved.
    const invalid = await resolve(itemId, h.a.token, { action: 'ignored', note: ' ', operator: 'me' });
    expectError(invalid, 400, 'validation_error');
    expect(invalid.body.error?.fields?.map((f) => f.path).sort()).toEqual(['action', 'note', 'operator']);
    expectError(await resolve('charge:m:k', h.a.token), 400, 'validation_error');
    expectError(await h.request('GET', '/v1/review-items?open=yes', { token: h.a.token }), 400, 'validation_error');
    expectError(await h.request('GET', '/v1/review-items', { token: null }), 401, 'unauthorized');

    // Resolve: 200 with the resolved item; the id may be sent with its colons as they are.
    const resolved = await h.request('POST', `/v1/review-items/${itemId}/resolve`, {
      token: h.a.token,
      body: { action: 'refunded_at_provider', note: 'refunded in the provider dashboard' },
    });
    expect(resolved.status).toBe(200);
    expect(ReviewItemView.parse(resolved.body)).toMatchObject({
      id: itemId,
      status: 'resolved',
      resolution: {
        action: 'refunded_at_provider',
        note: 'refunded in the provider dashboard',
        operator: `api:${h.a.id}`,
      },
    });

    // It leaves the open list and shows as resolved among all items.
    await listsExactly(h.a.token, []);
    const all = await listsExactly(h.a.token, [itemId], '?open=false');
    expect(all.items[0]).toMatchObject({ status: 'resolved', resolution: { action: 'refunded_at_provider' } });

    // A second resolve: 409, the first resolution stands. Another merchant still gets 404, not 409.
    const again = await resolve(itemId, h.a.token, { action: 'no_action', note: 'again' });
    expectError(again, 409, 'invalid_transition');
    expectError(await resolve(itemId, h.b.token), 404, 'not_found');
    const [after] = (await list(h.a.token, '?open=false')).items;
    expect(after?.resolution?.action).toBe('refunded_at_provider');

    // The item without a merchant: an operator resolves it (any item, no merchant named), recorded as the operator.
    expectError(await h.request('GET', '/v1/review-items', { token: h.operator.token }), 403, 'forbidden');
    const byOperator = await resolve(operatorItemId, h.operator.token, { action: 'no_action', note: 'test payment' });
    expect(byOperator.status).toBe(200);
    expect(byOperator.body).toMatchObject({
      id: operatorItemId,
      status: 'resolved',
      providerPaymentId: operatorsOnly.id,
      resolution: { action: 'no_action', note: 'test payment', operator: `operator:${h.operator.id}` },
    });
    expect(byOperator.body.merchantId).toBeUndefined();
    expectError(await resolve(operatorItemId, h.operator.token), 409, 'invalid_transition');
    expectError(await resolve(operatorItemId, h.a.token), 404, 'not_found');
    // A merchant's item is the operator's to resolve too (here: already resolved by the merchant).
    expectError(await resolve(itemId, h.operator.token), 409, 'invalid_transition');
  });

  it('pages with pageToken; an item closed without a decision (terminated) leaves the open list, shows closed and answers 409', async () => {
    const fromMs = Date.now();
    const first = await orphanAtSimulator({ merchant_id: h.b.id, payment_key: 'never-started-1' });
    const second = await orphanAtSimulator({ merchant_id: h.b.id, payment_key: 'never-started-2' });
    const ids = [first, second].map((p) => reviewItemWorkflowId('simulator', p.id));
    const sweep = await runSweep(fromMs);
    expect(sweep.reviewItems).toEqual(expect.arrayContaining(ids));

    await listsExactly(h.b.token, ids);
    const page1 = await list(h.b.token, '?pageSize=1');
    expect(page1.items).toHaveLength(1);
    expect(page1.nextPageToken).toEqual(expect.any(String));
    const page2 = await list(h.b.token, `?pageSize=1&pageToken=${page1.nextPageToken}`);
    expect([...page1.items, ...page2.items].map((i) => i.id).sort()).toEqual([...ids].sort());
    expectError(
      await h.request('GET', '/v1/review-items?pageToken=not%20a%20token', { token: h.b.token }),
      400,
      'validation_error',
    );

    const [terminated, open] = ids as [string, string];
    await env.client.workflow.getHandle(terminated).terminate('closed by an operator');
    await listsExactly(h.b.token, [open]);
    const all = await listsExactly(h.b.token, ids, '?open=false');
    expect(Object.fromEntries(all.items.map((i) => [i.id, i.status]))).toEqual({
      [terminated]: 'closed',
      [open]: 'open',
    });
    const refused = await resolve(terminated, h.b.token);
    expectError(refused, 409, 'invalid_transition');
    expect(refused.body.error).toMatchObject({ message: expect.stringMatching(/closed \(terminated\)/) });
  });

  it('is documented in a valid /openapi.json', async () => {
    const doc = (await (await fetch(`${h.url}/openapi.json`)).json()) as {
      paths: Record<string, Record<string, { description?: string; responses: Record<string, unknown> }>>;
      components: { schemas: Record<string, unknown> };
    };

    await expect(validateOpenApi(doc)).resolves.toBeUndefined();
    const listOp = doc.paths['/v1/review-items']?.get;
    const resolveOp = doc.paths['/v1/review-items/{id}/resolve']?.post;
    expect(Object.keys(listOp?.responses ?? {})).toEqual(expect.arrayContaining(['200', '400', '401']));
    expect(listOp?.description).toMatch(/operators only/);
    expect(Object.keys(resolveOp?.responses ?? {})).toEqual(expect.arrayContaining(['200', '400', '404', '409']));
    expect(Object.keys(doc.components.schemas)).toEqual(expect.arrayContaining(['ReviewItemView', 'ReviewItemList']));
  });
});
