import { Client, type ConnectionLike, WorkflowNotFoundError } from '@temporalio/client';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { PaymentsClient, ValidationError } from '../../src/client';
import { chargeWorkflowId } from '../../src/domain/ids';
import { connectDevServer } from '../helpers/servers';
import { type ApiWorld, chargeBody, newKey, startWorld, testTimings } from '../helpers/world';
import { eventually } from '../helpers/eventually';

let env: TestWorkflowEnvironment;
let h: ApiWorld;

beforeAll(async () => {
  env = await connectDevServer();
  h = await startWorld(env, { api: true });
}, 60_000);

afterAll(async () => {
  await h?.close();
  await env?.teardown();
});

const createEffects = (reference: string) =>
  h.ledger().effects.filter((e) => e.operation === 'create' && e.reference === reference);

/** Open and closed runs of one workflow id, as visibility lists them. */
async function runsOf(workflowId: string): Promise<number> {
  let n = 0;
  for await (const _ of env.client.workflow.list({ query: `WorkflowId = '${workflowId}'` })) n += 1;
  return n;
}

describe('POST /v1/payments', () => {
  it('answers a repeat of the same key and body with the same payment, marked Idempotent-Replayed', async () => {
    const key = newKey();
    const body = chargeBody();
    const first = await h.request('POST', '/v1/payments', { key, body });
    const second = await h.request('POST', '/v1/payments', { key, body });

    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({ key, merchantId: h.a.id, status: 'succeeded', amountCaptured: 1_000 });
    expect(first.headers.get('idempotent-replayed')).toBeNull();
    expect(second.status).toBe(200);
    expect(second.headers.get('idempotent-replayed')).toBe('true');
    expect(second.body).toEqual(first.body);
    expect(createEffects(body.orderId as string)).toHaveLength(1);
    await eventually('one run in visibility', async () => (await runsOf(chargeWorkflowId(h.a.id, key))) === 1);
  });

  it('tells the request that started the payment from a repeat by the start response, describing it only for the repeat', async () => {
    // The client's Temporal calls, counted: the describe that used to follow every charge was a read per payment.
    const described: string[] = [];
    const base = env.connection.workflowService;
    const workflowService: ConnectionLike['workflowService'] = Object.create(base);
    Object.assign(workflowService, {
      describeWorkflowExecution: (request: Parameters<typeof base.describeWorkflowExecution>[0]) => {
        described.push(request.execution?.workflowId ?? '');
        return base.describeWorkflowExecution(request);
      },
    });
    const connection: ConnectionLike = Object.assign(Object.create(env.connection) as ConnectionLike, {
      workflowService,
    });
    const payments = new PaymentsClient(new Client({ connection, namespace: env.namespace ?? 'default' }), {
      taskQueue: h.taskQueue,
      timings: testTimings,
    });
    const key = newKey();
    const body = chargeBody();

    const first = await payments.charge(h.a.id, key, body);
    expect(first).toMatchObject({ replayed: false, view: { status: 'succeeded' } });
    expect(described).toEqual([]);
    const repeat = await payments.charge(h.a.id, key, body);
    expect(repeat).toMatchObject({ replayed: true, view: { status: 'succeeded' } });
    expect(createEffects(body.orderId as string)).toHaveLength(1);
  });

  it('turns 100 concurrent identical requests to 4 API instances into one workflow and one provider effect', async () => {
    const urls = [h.url, ...(await Promise.all([1, 2, 3].map(() => h.anotherApi())))];
    const key = newKey();
    const body = chargeBody();
    const answers = await Promise.all(
      Array.from({ length: 100 }, (_, i) => h.request('POST', '/v1/payments', { key, body, baseUrl: urls[i % 4] })),
    );

    expect(answers.map((a) => a.status).filter((s) => s !== 200 && s !== 202)).toEqual([]);
    expect(new Set(answers.map((a) => a.body.key))).toEqual(new Set([key]));
    expect(answers.filter((a) => a.headers.get('idempotent-replayed') === null)).toHaveLength(1);
    expect(createEffects(body.orderId as string)).toHaveLength(1);
    const description = await env.client.workflow.getHandle(chargeWorkflowId(h.a.id, key)).describe();
    expect(description.raw.workflowExecutionInfo?.firstRunId).toBe(description.runId);
    await eventually('one run in visibility', async () => (await runsOf(chargeWorkflowId(h.a.id, key))) === 1);
  });

  it('refuses the same key with another body (422) without a second effect', async () => {
    const key = newKey();
    const body = chargeBody();
    expect((await h.request('POST', '/v1/payments', { key, body })).status).toBe(200);

    const reused = await h.request('POST', '/v1/payments', {
      key,
      body: { ...body, amount: { value: 2_000, currency: 'EUR' } },
    });

    expect(reused.status).toBe(422);
    expect(reused.body.error?.type).toBe('idempotency_key_reused');
    expect(createEffects(body.orderId as string)).toHaveLength(1);
    expect(h.ledger().effects.filter((e) => e.amount === 2_000 && e.reference === body.orderId)).toEqual([]);
  });

  it.each([
    ['a missing field', { amount: { value: 1_000, currency: 'EUR' }, paymentMethod: 'pm_card_visa' }, 'orderId'],
    ['a negative amount', chargeBody({ amount: { value: -5, currency: 'EUR' } }), 'amount.value'],
    ['a lower-case currency', chargeBody({ amount: { value: 5, currency: 'eur' } }), 'amount.currency'],
    ['a card number as payment method', chargeBody({ paymentMethod: '4242424242424242' }), 'paymentMethod'],
    ['an unknown field', chargeBody({ cvc: '123' }), 'cvc'],
    ['a provider that is not configured', chargeBody({ provider: 'no_such_provider' }), 'provider'],
  ])('refuses %s with 400 naming the field, starting nothing', async (_what, body, field) => {
    const key = newKey();
    const answer = await h.request('POST', '/v1/payments', { key, body });

    expect(answer.status).toBe(400);
    expect(answer.body.error?.type).toBe('validation_error');
    expect(answer.body.error?.fields?.map((f) => f.path)).toContain(field);
    await expect(env.client.workflow.getHandle(chargeWorkflowId(h.a.id, key)).describe()).rejects.toBeInstanceOf(
      WorkflowNotFoundError,
    );
    expect(h.ledger().requests.filter((r) => r.reference === body.orderId)).toEqual([]);
  });

  it('refuses a provider that is not configured in the client too (direct callers), starting nothing', async () => {
    const key = newKey();
    const body = chargeBody({ provider: 'no_such_provider' });

    const refused = h.payments.charge(h.a.id, key, body);

    await expect(refused).rejects.toBeInstanceOf(ValidationError);
    await expect(refused).rejects.toMatchObject({ fields: [{ path: 'provider' }] });
    await expect(env.client.workflow.getHandle(chargeWorkflowId(h.a.id, key)).describe()).rejects.toBeInstanceOf(
      WorkflowNotFoundError,
    );
    expect(h.ledger().requests.filter((r) => r.reference === body.orderId)).toEqual([]);
  });

  it('refuses a missing or malformed Idempotency-Key with 400', async () => {
    const missing = await h.request('POST', '/v1/payments', { body: chargeBody() });
    const tooLong = await h.request('POST', '/v1/payments', { key: 'k'.repeat(256), body: chargeBody() });

    expect(missing.status).toBe(400);
    expect(missing.body.error?.fields?.map((f) => f.path)).toEqual(['Idempotency-Key']);
    expect(tooLong.status).toBe(400);
    expect(tooLong.body.error?.fields?.map((f) => f.path)).toEqual(['Idempotency-Key']);
  });
});

describe('auth and merchant isolation', () => {
  it('answers 401 to a wrong or missing token', async () => {
    const wrong = await h.request('POST', '/v1/payments', {
      token: 'tok_not_a_real_token',
      key: newKey(),
      body: chargeBody(),
    });
    const missing = await h.request('GET', '/v1/payments', { token: null });

    expect(wrong.status).toBe(401);
    expect(wrong.body).toEqual({ error: { type: 'unauthorized' } });
    expect(missing.status).toBe(401);
  });

  it('answers 404 for another merchant’s key exactly as for a missing one', async () => {
    const key = newKey();
    expect((await h.request('POST', '/v1/payments', { key, body: chargeBody() })).status).toBe(200);

    const foreign = await h.request('GET', `/v1/payments/${key}`, { token: h.b.token });
    const missing = await h.request('GET', `/v1/payments/${newKey()}`, { token: h.b.token });
    const own = await h.request('GET', `/v1/payments/${key}`);

    expect(foreign.status).toBe(404);
    expect(foreign.body).toEqual(missing.body);
    expect(own.status).toBe(200);
    expect(own.body.key).toBe(key);
  });
});

describe('roles: merchant tokens act on their payments, operator tokens only resolve', () => {
  it('refuses a merchant token on resolve with 403 forbidden, whatever the query, before the handler runs', async () => {
    const key = newKey();
    expect((await h.request('POST', '/v1/payments', { key, body: chargeBody() })).status).toBe(200);
    const body = { outcome: 'failed', note: 'a merchant trying to resolve its own payment' };

    const own = await h.request('POST', `/v1/payments/${key}/resolve`, { body });
    const named = await h.request('POST', `/v1/payments/${key}/resolve?merchantId=${h.a.id}`, { body });
    const foreign = await h.request('POST', `/v1/payments/${key}/resolve?merchantId=${h.a.id}`, {
      body,
      token: h.b.token,
    });
    const anonymous = await h.request('POST', `/v1/payments/${key}/resolve?merchantId=${h.a.id}`, {
      body,
      token: null,
    });
    const wrong = await h.request('POST', `/v1/payments/${key}/resolve?merchantId=${h.a.id}`, {
      body,
      token: 'tok_not_a_real_token_at_all',
    });

    for (const answer of [own, named, foreign]) {
      expect({ status: answer.status, type: answer.body.error?.type }).toEqual({ status: 403, type: 'forbidden' });
    }
    expect(anonymous.status).toBe(401);
    expect(wrong.status).toBe(401);
    expect((await h.request('GET', `/v1/payments/${key}`)).body.status).toBe('succeeded');
  });

  it('lets an operator resolve a payment it names by merchant and key (400 without merchantId, 404 for another merchant)', async () => {
    const key = newKey();
    expect((await h.request('POST', '/v1/payments', { key, body: chargeBody() })).status).toBe(200);
    const body = { outcome: 'failed', note: 'operator check' };
    const as = (query: string) =>
      h.request('POST', `/v1/payments/${key}/resolve${query}`, { body, token: h.operator.token });

    const unnamed = await as('');
    const otherMerchant = await as(`?merchantId=${h.b.id}`);
    const named = await as(`?merchantId=${h.a.id}`);

    expect(unnamed.status).toBe(400);
    expect(unnamed.body.error?.fields?.map((f) => f.path)).toEqual(['merchantId']);
    expect(otherMerchant.status).toBe(404);
    // It reached the payment: a succeeded payment is not in review, so the verdict is refused.
    expect(named.status).toBe(409);
    expect(named.body.error?.type).toBe('invalid_transition');
  });

  it('answers 403 to an operator token on merchant routes, starting nothing', async () => {
    const key = newKey();
    const body = chargeBody();
    const token = h.operator.token;

    const answers = await Promise.all([
      h.request('POST', '/v1/payments', { key, body, token }),
      h.request('GET', '/v1/payments', { token }),
      h.request('GET', `/v1/payments/${key}`, { token }),
      h.request('POST', `/v1/payments/${key}/capture`, { key: newKey(), body: {}, token }),
      h.request('POST', `/v1/payments/${key}/refunds`, { key: newKey(), body: { amount: 1 }, token }),
      h.request('GET', '/v1/review-items', { token }),
    ]);

    expect(answers.map((a) => [a.status, a.body.error?.type])).toEqual(Array(6).fill([403, 'forbidden']));
    expect(h.ledger().requests.filter((r) => r.reference === body.orderId)).toEqual([]);
  });
});

describe('capture, refund, resolve', () => {
  it('captures part of a manual authorization once per key, refunds within the captured amount, and refuses the rest', async () => {
    const key = newKey();
    const body = chargeBody({ capture: 'manual' });
    const authorized = await h.request('POST', '/v1/payments', { key, body });
    expect(authorized.status).toBe(200);
    expect(authorized.body).toMatchObject({ status: 'authorized', amountAuthorized: 1_000, amountCaptured: 0 });

    const captureKey = newKey();
    const captured = await h.request('POST', `/v1/payments/${key}/capture`, { key: captureKey, body: { amount: 400 } });
    const repeated = await h.request('POST', `/v1/payments/${key}/capture`, { key: captureKey, body: { amount: 400 } });
    const reused = await h.request('POST', `/v1/payments/${key}/capture`, { key: captureKey, body: { amount: 300 } });
    const again = await h.request('POST', `/v1/payments/${key}/capture`, { key: newKey(), body: {} });

    expect(captured.status).toBe(200);
    expect(captured.body).toMatchObject({ status: 'succeeded', amountCaptured: 400 });
    expect(repeated.status).toBe(200);
    expect(repeated.body).toMatchObject({ status: 'succeeded', amountCaptured: 400 });
    expect(reused.status).toBe(422);
    expect(reused.body.error?.type).toBe('idempotency_key_reused');
    expect(again.status).toBe(409);
    expect(again.body.error?.type).toBe('invalid_transition');

    const refunded = await h.request('POST', `/v1/payments/${key}/refunds`, { key: newKey(), body: { amount: 300 } });
    const over = await h.request('POST', `/v1/payments/${key}/refunds`, { key: newKey(), body: { amount: 200 } });
    const resolve = await h.request('POST', `/v1/payments/${key}/resolve?merchantId=${h.a.id}`, {
      token: h.operator.token,
      body: { outcome: 'failed', note: 'test' },
    });

    expect(refunded.status).toBe(200);
    expect(refunded.body).toMatchObject({ status: 'succeeded', amountCaptured: 400, amountRefunded: 300 });
    expect(over.status).toBe(422);
    expect(over.body.error?.type).toBe('amount_exceeded');
    expect(resolve.status).toBe(409);
    expect(resolve.body.error?.type).toBe('invalid_transition');
    const effects = h.ledger().effects.filter((e) => e.reference === body.orderId);
    expect(effects.map((e) => [e.operation, e.amount])).toEqual([
      ['create', 1_000],
      ['capture', 400],
      ['refund', 300],
    ]);
  });

  it('refuses a capture over the authorization (422), of a declined payment (409) and of a foreign one (404)', async () => {
    const manual = newKey();
    expect(
      (await h.request('POST', '/v1/payments', { key: manual, body: chargeBody({ capture: 'manual' }) })).status,
    ).toBe(200);
    const declinedKey = newKey();
    const declined = await h.request('POST', '/v1/payments', {
      key: declinedKey,
      body: chargeBody({ paymentMethod: 'pm_decline_insufficient_funds' }),
    });
    expect(declined.status).toBe(200);
    expect(declined.body.status).toBe('declined');

    const over = await h.request('POST', `/v1/payments/${manual}/capture`, { key: newKey(), body: { amount: 5_000 } });
    const ofDeclined = await h.request('POST', `/v1/payments/${declinedKey}/capture`, { key: newKey(), body: {} });
    const foreign = await h.request('POST', `/v1/payments/${manual}/capture`, {
      key: newKey(),
      body: {},
      token: h.b.token,
    });
    const missingKey = await h.request('POST', `/v1/payments/${manual}/capture`, { body: {} });

    expect(over.status).toBe(422);
    expect(over.body.error?.type).toBe('amount_exceeded');
    expect(ofDeclined.status).toBe(409);
    expect(foreign.status).toBe(404);
    expect(missingKey.status).toBe(400);
  });
  it('answers 202 with Location when the capture outlasts the wait, and finishes it in the workflow', async () => {
    const key = newKey();
    const body = chargeBody({ capture: 'manual' });
    expect((await h.request('POST', '/v1/payments', { key, body })).status).toBe(200);
    h.sim.addFaults({
      rules: [
        {
          match: { operation: 'capture', reference: body.orderId as string },
          fault: 'latency',
          latency_ms: 10_000, // longer than the client's 8 s wait (testTimings.submitWaitMs)
          times: 1,
        },
      ],
    });

    const slow = await h.request('POST', `/v1/payments/${key}/capture`, { key: newKey(), body: {} });

    expect(slow.status).toBe(202);
    expect(slow.headers.get('location')).toBe(`/v1/payments/${key}`);
    expect(slow.body.status).toBe('authorized');
    const done = await eventually(
      'the capture to finish',
      async () => {
        const view = await h.request('GET', `/v1/payments/${key}`);
        return view.body.status === 'succeeded' && view;
      },
      20_000,
    );
    expect(done.body.amountCaptured).toBe(1_000);
    expect(h.ledger().effects.filter((e) => e.operation === 'capture' && e.reference === body.orderId)).toHaveLength(1);
  }, 30_000);
});

describe('GET /v1/payments', () => {
  it('lists exactly the merchant’s unknown payments, page by page', async () => {
    const unknownRefs = [`order_u_${newKey()}`, `order_u_${newKey()}`, `order_u_${newKey()}`];
    h.sim.addFaults({
      rules: unknownRefs.map((reference) => ({
        match: { operation: 'create' as const, reference },
        fault: 'status' as const,
        status: 500,
      })),
    });
    const unknownKeys = [newKey(), newKey()];
    const foreignUnknown = newKey();
    const settled = newKey();
    await Promise.all([
      h.request('POST', '/v1/payments', { key: unknownKeys[0], body: chargeBody({ orderId: unknownRefs[0] }) }),
      h.request('POST', '/v1/payments', { key: unknownKeys[1], body: chargeBody({ orderId: unknownRefs[1] }) }),
      h.request('POST', '/v1/payments', {
        key: foreignUnknown,
        body: chargeBody({ orderId: unknownRefs[2] }),
        token: h.b.token,
      }),
      h.request('POST', '/v1/payments', { key: settled, body: chargeBody() }),
    ]);

    const listed = await eventually(
      'visibility to show both unknown payments',
      async () => {
        const page = await h.request('GET', '/v1/payments?status=unknown');
        const keys = (page.body.payments as { key: string; status: string }[]).map((p) => p.key).sort();
        return keys.length === 2 && page;
      },
      20_000,
    );
    expect((listed.body.payments as { key: string }[]).map((p) => p.key).sort()).toEqual([...unknownKeys].sort());
    expect((listed.body.payments as { status: string }[]).every((p) => p.status === 'unknown')).toBe(true);

    const first = await h.request('GET', '/v1/payments?status=unknown&pageSize=1');
    expect(first.body.payments).toHaveLength(1);
    expect(typeof first.body.nextPageToken).toBe('string');
    const second = await h.request(
      'GET',
      `/v1/payments?status=unknown&pageSize=1&pageToken=${first.body.nextPageToken as string}`,
    );
    const pagedKeys = [
      ...(first.body.payments as { key: string }[]),
      ...(second.body.payments as { key: string }[]),
    ].map((p) => p.key);
    expect(pagedKeys.sort()).toEqual([...unknownKeys].sort());

    const foreign = await h.request('GET', '/v1/payments?status=unknown', { token: h.b.token });
    expect((foreign.body.payments as { key: string }[]).map((p) => p.key)).toEqual([foreignUnknown]);
  }, 60_000);

  it('filters by order id (quotes included) and refuses an unknown status or an unmatchable order id with 400', async () => {
    const orderId = `order_o'brien' OR '1'='1 ${newKey()}`;
    const key = newKey();
    await h.request('POST', '/v1/payments', { key, body: chargeBody({ orderId }) });

    const byOrder = await eventually('visibility to index the order id', async () => {
      const page = await h.request('GET', `/v1/payments?orderId=${encodeURIComponent(orderId)}`);
      return (page.body.payments as unknown[]).length === 1 && page;
    });
    const bad = await h.request('GET', '/v1/payments?status=lost');
    const unmatchable = await h.request('GET', `/v1/payments?orderId=${encodeURIComponent('a\\b')}`);

    expect((byOrder.body.payments as { key: string }[])[0]?.key).toBe(key);
    expect(bad.status).toBe(400);
    expect(bad.body.error?.fields?.map((f) => f.path)).toEqual(['status']);
    expect(unmatchable.status).toBe(400);
    expect(unmatchable.body.error?.fields?.map((f) => f.path)).toEqual(['orderId']);
  });
});
