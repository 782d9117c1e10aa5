import { startSimulator, type RunningSimulator } from '../../src/simulator/server';
import { call, createBody, newApiKey, newKey } from './helpers';

let sim: RunningSimulator;
beforeAll(async () => {
  sim = await startSimulator({ port: 0 });
});
afterAll(() => sim.close());

const create = (apiKey: string, over: Record<string, unknown> = {}) =>
  call(sim, 'POST', '/v1/payments', { apiKey, key: newKey(), body: createBody(over) });

describe('payments', () => {
  it('refuses a request without an api key', async () => {
    const res = await call(sim, 'POST', '/v1/payments', { key: newKey(), body: createBody() });
    expect(res.status).toBe(401);
    expect(res.body).toMatchObject({ error: { type: 'authentication_error' } });
  });

  it('creates an automatic-capture payment as succeeded', async () => {
    const apiKey = newApiKey();
    const before = sim.nowS();
    const res = await create(apiKey, { reference: 'order_1', amount: 1250, currency: 'USD' });
    expect(res.status).toBe(200);
    expect(res.headers.get('idempotent-replayed')).toBeNull();
    expect(res.body).toEqual({
      id: expect.stringMatching(/^pay_/),
      status: 'succeeded',
      amount: 1250,
      amount_captured: 1250,
      amount_refunded: 0,
      currency: 'USD',
      reference: 'order_1',
      created: expect.any(Number),
    });
    expect(res.body.created).toBeGreaterThanOrEqual(before);
    expect(res.body.created).toBeLessThanOrEqual(sim.nowS());
    expect(sim.ledger().effects.filter((e) => e.api_key === apiKey)).toEqual([
      expect.objectContaining({ operation: 'create', reference: 'order_1', amount: 1250 }),
    ]);
  });

  it('authorizes a manual payment, captures part of it, then refuses a second capture', async () => {
    const apiKey = newApiKey();
    const created = await create(apiKey, { capture: 'manual', amount: 1000 });
    expect(created.body).toMatchObject({ status: 'authorized', amount_captured: 0 });
    const id = String(created.body.id);

    const over = await call(sim, 'POST', `/v1/payments/${id}/capture`, {
      apiKey,
      key: newKey(),
      body: { amount: 1001 },
    });
    expect(over.status).toBe(400);
    expect(over.body).toMatchObject({
      error: { type: 'invalid_request_error', code: 'amount_too_large', param: 'amount' },
    });

    const captured = await call(sim, 'POST', `/v1/payments/${id}/capture`, {
      apiKey,
      key: newKey(),
      body: { amount: 600 },
    });
    expect(captured.status).toBe(200);
    expect(captured.body).toMatchObject({ id, status: 'succeeded', amount: 1000, amount_captured: 600 });

    const again = await call(sim, 'POST', `/v1/payments/${id}/capture`, { apiKey, key: newKey() });
    expect(again.status).toBe(400);
    expect(again.body).toMatchObject({ error: { code: 'payment_unexpected_state' } });
    expect(
      sim
        .ledger()
        .effects.filter((e) => e.api_key === apiKey)
        .map((e) => [e.operation, e.amount]),
    ).toEqual([
      ['create', 1000],
      ['capture', 600],
    ]);
  });

  it('captures the full authorized amount by default', async () => {
    const apiKey = newApiKey();
    const { body } = await create(apiKey, { capture: 'manual', amount: 700 });
    const captured = await call(sim, 'POST', `/v1/payments/${String(body.id)}/capture`, { apiKey, key: newKey() });
    expect(captured.body).toMatchObject({ status: 'succeeded', amount_captured: 700 });
  });

  it('voids an authorized payment only', async () => {
    const apiKey = newApiKey();
    const { body } = await create(apiKey, { capture: 'manual' });
    const id = String(body.id);
    const voided = await call(sim, 'POST', `/v1/payments/${id}/void`, { apiKey, key: newKey() });
    expect(voided.status).toBe(200);
    expect(voided.body).toMatchObject({ id, status: 'voided' });
    const capture = await call(sim, 'POST', `/v1/payments/${id}/capture`, { apiKey, key: newKey() });
    expect(capture.status).toBe(400);
    const automatic = await create(apiKey);
    const voidSucceeded = await call(sim, 'POST', `/v1/payments/${String(automatic.body.id)}/void`, {
      apiKey,
      key: newKey(),
    });
    expect(voidSucceeded.status).toBe(400);
  });

  it('refunds in parts and refuses more than captured minus refunded', async () => {
    const apiKey = newApiKey();
    const { body } = await create(apiKey, { amount: 1000 });
    const id = String(body.id);
    const refund = await call(sim, 'POST', `/v1/payments/${id}/refunds`, {
      apiKey,
      key: newKey(),
      body: { amount: 400 },
    });
    expect(refund.status).toBe(200);
    expect(refund.body).toEqual({
      id: expect.stringMatching(/^re_/),
      payment_id: id,
      amount: 400,
      status: 'succeeded',
      created: expect.any(Number),
    });
    const over = await call(sim, 'POST', `/v1/payments/${id}/refunds`, {
      apiKey,
      key: newKey(),
      body: { amount: 601 },
    });
    expect(over.status).toBe(400);
    expect(over.body).toMatchObject({ error: { code: 'amount_too_large' } });
    const rest = await call(sim, 'POST', `/v1/payments/${id}/refunds`, {
      apiKey,
      key: newKey(),
      body: { amount: 600 },
    });
    expect(rest.status).toBe(200);
    const got = await call(sim, 'GET', `/v1/payments/${id}`, { apiKey });
    expect(got.body).toMatchObject({ amount_captured: 1000, amount_refunded: 1000 });
  });

  it('declines pm_decline tokens with 402 and no effect', async () => {
    const apiKey = newApiKey();
    const res = await create(apiKey, { payment_method: 'pm_decline_insufficient_funds' });
    expect(res.status).toBe(402);
    expect(res.body).toMatchObject({
      error: { type: 'card_error', code: 'card_declined', decline_code: 'insufficient_funds' },
    });
    expect(sim.ledger().effects.filter((e) => e.api_key === apiKey)).toEqual([]);
  });

  it.each([
    [{ amount: 0 }, 'amount', 'parameter_invalid'],
    [{ amount: 10.5 }, 'amount', 'parameter_invalid'],
    [{ currency: 'eur' }, 'currency', 'parameter_invalid'],
    [{ capture: 'later' }, 'capture', 'parameter_invalid'],
    [{ reference: undefined }, 'reference', 'parameter_missing'],
  ])('refuses an invalid create body %j with 400 on %s', async (over, param, code) => {
    const res = await create(newApiKey(), over);
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ error: { type: 'invalid_request_error', code, param } });
  });

  it('refuses a body that is not JSON', async () => {
    const res = await fetch(`${sim.url}/v1/payments`, {
      method: 'POST',
      headers: { authorization: `Bearer ${newApiKey()}`, 'content-type': 'application/json' },
      body: '{"amount":',
    });
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({ error: { code: 'body_invalid_json' } });
  });

  it('answers 404 for unknown payments and for other merchants’ payments alike', async () => {
    const owner = newApiKey();
    const { body } = await create(owner);
    expect((await call(sim, 'GET', '/v1/payments/pay_nope', { apiKey: owner })).status).toBe(404);
    const foreign = await call(sim, 'GET', `/v1/payments/${String(body.id)}`, { apiKey: newApiKey() });
    expect(foreign.status).toBe(404);
    expect(foreign.body).toMatchObject({ error: { code: 'resource_missing' } });
    const foreignCapture = await call(sim, 'POST', `/v1/payments/${String(body.id)}/refunds`, {
      apiKey: newApiKey(),
      key: newKey(),
      body: { amount: 1 },
    });
    expect(foreignCapture.status).toBe(404);
  });
});

describe('lookups', () => {
  it('finds payments by reference and by the key that created them', async () => {
    const apiKey = newApiKey();
    const key = newKey();
    const first = await call(sim, 'POST', '/v1/payments', { apiKey, key, body: createBody({ reference: 'ord_A' }) });
    await create(apiKey, { reference: 'ord_A' });
    await create(apiKey, { reference: 'ord_B' });

    const byRef = await call(sim, 'GET', '/v1/payments?reference=ord_A', { apiKey });
    expect(byRef.body).toMatchObject({ has_more: false });
    expect((byRef.body.data as unknown[]).length).toBe(2);

    const byKey = await call(sim, 'GET', `/v1/payments?idempotency_key=${encodeURIComponent(key)}`, { apiKey });
    expect(byKey.body).toEqual({ data: [first.body], has_more: false });

    const otherMerchant = await call(sim, 'GET', '/v1/payments?reference=ord_A', { apiKey: newApiKey() });
    expect(otherMerchant.body).toEqual({ data: [], has_more: false });
    expect(sim.ledger().requests.filter((r) => r.api_key === apiKey && r.operation === 'lookup')).toHaveLength(2);
  });

  it('pages through payments in (created, id) order with starting_after', async () => {
    const apiKey = newApiKey();
    const ids: string[] = [];
    for (let i = 0; i < 7; i++) {
      const { body } = await create(apiKey, { amount: 100 + i });
      ids.push(String(body.id));
    }
    const seen: string[] = [];
    let after: string | undefined;
    for (let page = 0; page < 10; page++) {
      const qs = `limit=3${after ? `&starting_after=${after}` : ''}`;
      const res = await call(sim, 'GET', `/v1/payments?${qs}`, { apiKey });
      const data = res.body.data as Array<{ id: string }>;
      seen.push(...data.map((p) => p.id));
      after = data.at(-1)?.id;
      if (!res.body.has_more) break;
    }
    expect(seen).toEqual(ids);
  });

  it('filters by created time on the simulator clock', async () => {
    const apiKey = newApiKey();
    const early = await create(apiKey);
    await sim.advanceClock(100);
    const late = await create(apiKey);
    const cut = Number(late.body.created);
    const before = await call(sim, 'GET', `/v1/payments?created_lt=${cut}`, { apiKey });
    const after = await call(sim, 'GET', `/v1/payments?created_gte=${cut}`, { apiKey });
    expect((before.body.data as unknown[]).map((p) => (p as { id: string }).id)).toEqual([early.body.id]);
    expect((after.body.data as unknown[]).map((p) => (p as { id: string }).id)).toEqual([late.body.id]);
  });

  it('refuses an unknown cursor and an invalid limit', async () => {
    const apiKey = newApiKey();
    expect((await call(sim, 'GET', '/v1/payments?starting_after=pay_nope', { apiKey })).status).toBe(400);
    const limit = await call(sim, 'GET', '/v1/payments?limit=0', { apiKey });
    expect(limit.status).toBe(400);
    expect(limit.body).toMatchObject({ error: { param: 'limit' } });
  });
});
