/**
 * `/v1/wallets` over HTTP against a real PostgreSQL (this file's database): credits with their replays and 422s,
 * a wallet and its entries, and another merchant's wallet as none of theirs.
 */
import { connectDevServer } from '../helpers/servers';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { WalletLedger } from '../../src/wallets';
import { openTestDatabase } from '../helpers/database';
import { type ApiWorld, startWorld } from '../helpers/world';

let env: TestWorkflowEnvironment;
let db: Awaited<ReturnType<typeof openTestDatabase>>;
let h: ApiWorld;

beforeAll(async () => {
  env = await connectDevServer();
  db = await openTestDatabase();
  h = await startWorld(env, { api: true, wallets: new WalletLedger(db.pool), workers: false });
});
afterAll(async () => {
  await h?.close();
  await db?.drop();
  await env?.teardown();
});

const credit = (walletId: string, key: string, body: unknown, token?: string) =>
  h.request('POST', `/v1/wallets/${walletId}/credits`, { key, body, ...(token ? { token } : {}) });

describe('POST /v1/wallets/:walletId/credits', () => {
  it('credits once per key: 200, a repeat replays with Idempotent-Replayed, another body is 422', async () => {
    const first = await credit('w-1', 'c-1', { amount: { value: 1_000, currency: 'EUR' }, reason: 'welcome bonus' });
    const again = await credit('w-1', 'c-1', { amount: { value: 1_000, currency: 'EUR' }, reason: 'welcome bonus' });
    const other = await credit('w-1', 'c-1', { amount: { value: 999, currency: 'EUR' }, reason: 'welcome bonus' });
    const elsewhere = await credit('w-2', 'c-1', {
      amount: { value: 1_000, currency: 'EUR' },
      reason: 'welcome bonus',
    });

    expect(first.status).toBe(200);
    expect(first.headers.get('idempotent-replayed')).toBeNull();
    expect(first.body).toMatchObject({
      walletId: 'w-1',
      merchantId: h.a.id,
      currency: 'EUR',
      balance: 1_000,
      held: 0,
      available: 1_000,
    });
    expect(again.status).toBe(200);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.body).toEqual(first.body);
    expect(other.status).toBe(422);
    expect(other.body.error?.type).toBe('idempotency_key_reused');
    expect(elsewhere.status).toBe(422);
    expect(elsewhere.body.error?.type).toBe('idempotency_key_reused');
    expect((await h.request('GET', '/v1/wallets/w-1')).body).toMatchObject({ balance: 1_000 });
    expect((await h.request('GET', '/v1/wallets/w-2')).status).toBe(404);
    const metrics = await (await fetch(`${h.url}/metrics`)).text();
    expect(metrics).toContain('payments_wallet_operations_total{kind="credit",outcome="replayed"} 1');
    expect(metrics).toContain('payments_wallet_operations_total{kind="credit",outcome="IdempotencyKeyReused"} 2');
  });

  it('refuses another currency than the wallet’s with 422 currency_mismatch, nothing applied', async () => {
    await credit('w-cur', 'cur-1', { amount: { value: 500, currency: 'JPY' } });
    const usd = await credit('w-cur', 'cur-2', { amount: { value: 500, currency: 'USD' } });

    expect(usd.status).toBe(422);
    expect(usd.body.error?.type).toBe('currency_mismatch');
    expect((await h.request('GET', '/v1/wallets/w-cur')).body).toMatchObject({ currency: 'JPY', balance: 500 });
  });

  it('answers 400 naming the field for a bad body, wallet id or key, and 403 to an operator', async () => {
    const zero = await credit('w-bad', 'b-1', { amount: { value: 0, currency: 'EUR' } });
    const lower = await credit('w-bad', 'b-2', { amount: { value: 1, currency: 'eur' } });
    const badId = await credit('w bad!', 'b-3', { amount: { value: 1, currency: 'EUR' } });
    const noKey = await h.request('POST', '/v1/wallets/w-bad/credits', {
      body: { amount: { value: 1, currency: 'EUR' } },
    });
    const operator = await credit('w-bad', 'b-4', { amount: { value: 1, currency: 'EUR' } }, h.operator.token);

    expect([zero.status, lower.status, badId.status, noKey.status, operator.status]).toEqual([400, 400, 400, 400, 403]);
    expect(zero.body.error?.fields?.[0]?.path).toBe('amount.value');
    expect(lower.body.error?.fields?.[0]?.path).toBe('amount.currency');
    expect(badId.body.error?.fields?.[0]?.path).toBe('walletId');
    expect(noKey.body.error?.fields?.[0]?.path).toBe('Idempotency-Key');
    expect((await h.request('GET', '/v1/wallets/w-bad')).status).toBe(404);
  });
});

describe('GET /v1/wallets/:walletId and its entries', () => {
  it('shows a merchant its own wallet only: another merchant’s of the same id is 404', async () => {
    await credit('shared-name', 'own-1', { amount: { value: 700, currency: 'EUR' } });

    expect((await h.request('GET', '/v1/wallets/shared-name')).status).toBe(200);
    const theirs = await h.request('GET', '/v1/wallets/shared-name', { token: h.b.token });
    const theirEntries = await h.request('GET', '/v1/wallets/shared-name/entries', { token: h.b.token });
    expect(theirs.status).toBe(404);
    expect(theirs.body.error?.type).toBe('not_found');
    expect(theirEntries.status).toBe(404);
  });

  it('lists the entries oldest first, page by page, and the balance is their sum', async () => {
    for (const [i, value] of [100, 200, 300, 400, 500].entries()) {
      await credit('w-pages', `p-${i}`, { amount: { value, currency: 'EUR' } });
    }
    const seen: number[] = [];
    let token: string | undefined;
    let pages = 0;
    do {
      const res = await h.request('GET', `/v1/wallets/w-pages/entries?pageSize=2${token ? `&pageToken=${token}` : ''}`);
      expect(res.status).toBe(200);
      const body = res.body as {
        entries: { amount: number; kind: string; operationId: string }[];
        nextPageToken?: string;
      };
      seen.push(...body.entries.map((e) => e.amount));
      expect(body.entries.every((e) => e.kind === 'credit')).toBe(true);
      token = body.nextPageToken;
      pages += 1;
    } while (token !== undefined);

    expect(seen).toEqual([100, 200, 300, 400, 500]);
    expect(pages).toBe(3);
    expect((await h.request('GET', '/v1/wallets/w-pages')).body).toMatchObject({ balance: 1_500 });
    expect((await h.request('GET', '/v1/wallets/w-pages/entries?pageSize=0')).status).toBe(400);
  });
});
