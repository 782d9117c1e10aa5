/**
 * One open payment per order across API processes (src/client/order-guard.ts, src/db/order-claims.ts): two
 * `PaymentsClient`s stand for two API processes (each has its own in-process map of orders being started), one
 * PostgreSQL between them, the run's dev server, real workers and the simulator, whose ledger says how many charges
 * left for each order.
 */
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { WorkflowNotFoundError } from '@temporalio/client';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import pg from 'pg';
import { PaymentInFlight, PaymentsClient } from '../../src/client';
import { OrderClaims, isDatabaseError } from '../../src/db';
import { chargeWorkflowId } from '../../src/domain/ids';
import type { PaymentTimings } from '../../src/domain/workflow-inputs';
import { openTestDatabase } from '../helpers/database';
import { closedPort } from '../helpers/net';
import { DEV_SERVER_ADDRESS_ENV, connectDevServer } from '../helpers/servers';
import { type ApiWorld, chargeBody, newKey, startWorld, testTimings } from '../helpers/world';

let env: TestWorkflowEnvironment;
let db: Awaited<ReturnType<typeof openTestDatabase>>;
let h: ApiWorld;
let claims: OrderClaims;
/** The world's second API (its own PaymentsClient, the same claims): another API process as the order guard sees it. */
let secondApi: string;

const timings: PaymentTimings = { ...testTimings, settleWindowMs: 3_000 };

beforeAll(async () => {
  env = await connectDevServer();
  db = await openTestDatabase();
  claims = new OrderClaims(db.pool);
  h = await startWorld(env, { api: true, timings, orderClaims: claims });
  secondApi = await h.anotherApi();
}, 60_000);

afterAll(async () => {
  await h?.close();
  await db?.drop();
  await env?.teardown();
});

/** An API process's client: with the shared claims, or (`claims: false`) as every process was before them. */
const apiProcess = (options: { claims?: boolean; windowMs?: number } = {}) =>
  new PaymentsClient(env.client, {
    taskQueue: h.taskQueue,
    timings,
    providers: ['simulator'],
    ...(options.claims === false ? {} : { orderClaims: claims }),
    ...(options.windowMs === undefined ? {} : { orderClaimWindowMs: options.windowMs }),
  });

/** The charges that reached the simulator's ledger for one order. */
const chargesOf = (orderId: string) =>
  h.ledger().effects.filter((e) => e.operation === 'create' && e.reference === orderId).length;

/** Two keys for each of `orders` orders, each pair sent at the same instant, one key to each process. */
async function race(one: PaymentsClient, other: PaymentsClient, orders: number) {
  const orderIds = Array.from({ length: orders }, () => `order_${randomUUID()}`);
  const answers = await Promise.all(
    orderIds.map(async (orderId) => {
      const keys = [newKey(), newKey()] as const;
      const settled = await Promise.allSettled([
        one.charge(h.a.id, keys[0], chargeBody({ orderId })),
        other.charge(h.a.id, keys[1], chargeBody({ orderId })),
      ]);
      return { orderId, keys, settled };
    }),
  );
  return answers;
}

describe('one open payment per order across API processes (order claims)', () => {
  it('two keys for one order sent at the same instant to two processes: one charges, the other is 409 naming it', async () => {
    // The adversary first: without the claims, the same race charges twice (the racers overlap: both processes'
    // visibility checks see no payment of the order).
    const unclaimed = await race(apiProcess({ claims: false }), apiProcess({ claims: false }), 6);
    expect(unclaimed.filter(({ orderId }) => chargesOf(orderId) === 2).length).toBeGreaterThan(0);

    // Through the world's two HTTP APIs, twelve orders at once.
    const answers = await Promise.all(
      Array.from({ length: 12 }, async () => {
        const orderId = `order_${randomUUID()}`;
        const keys = [newKey(), newKey()] as const;
        const replies = await Promise.all(
          keys.map((key, i) =>
            h.request('POST', '/v1/payments', {
              key,
              body: chargeBody({ orderId }),
              ...(i === 1 ? { baseUrl: secondApi } : {}),
            }),
          ),
        );
        return { orderId, keys, replies };
      }),
    );
    for (const { orderId, keys, replies } of answers) {
      const won = replies.flatMap((r, i) => (r.status === 200 ? [i] : []));
      expect({ orderId, won: won.length }).toEqual({ orderId, won: 1 });
      const winner = won[0] as number;
      expect(replies[winner]?.body.status).toBe('succeeded');
      const refused = replies[1 - winner];
      expect([refused?.status, refused?.body.error?.type]).toEqual([409, 'payment_in_flight']);
      expect(refused?.body.error).toMatchObject({ paymentKey: keys[winner] });
      expect({ orderId, charges: chargesOf(orderId) }).toEqual({ orderId, charges: 1 });
    }
  }, 90_000);

  it('a settled payment’s claim is taken over at once; an open one holds its order on the other process', async () => {
    const [a, b] = [apiProcess(), apiProcess()];
    const orderId = `order_${randomUUID()}`;
    const declinedKey = newKey();
    const declined = await a.charge(h.a.id, declinedKey, chargeBody({ orderId, paymentMethod: 'pm_decline_card' }));
    expect(declined.view.status).toBe('declined');
    // Its claim is fresh, but its payment is settled: another key on the other process charges at once.
    const paidKey = newKey();
    const paid = await b.charge(h.a.id, paidKey, chargeBody({ orderId }));
    expect(paid.view.status).toBe('succeeded');
    // The declined key's repeat replays its own decline whatever holds the order now.
    const repeat = await a.charge(h.a.id, declinedKey, chargeBody({ orderId, paymentMethod: 'pm_decline_card' }));
    expect([repeat.view.status, repeat.replayed]).toEqual(['declined', true]);

    const openOrder = `order_${randomUUID()}`;
    h.sim.addFaults({
      rules: [{ match: { operation: 'create', reference: openOrder }, fault: 'status', status: 500 }],
    });
    const openKey = newKey();
    const opened = await a.charge(h.a.id, openKey, chargeBody({ orderId: openOrder }));
    expect(opened.view.status).toBe('unknown');
    const refused = b.charge(h.a.id, newKey(), chargeBody({ orderId: openOrder }));
    await expect(refused).rejects.toBeInstanceOf(PaymentInFlight);
    await expect(refused).rejects.toMatchObject({ paymentKey: openKey });
    // Past the claim's window visibility decides: the order is still the open payment's, and the refused key gives
    // the claim it took back (a later key is told the open payment, not the refused key).
    const late = newKey();
    const refusedLate = apiProcess({ windowMs: 0 }).charge(h.a.id, late, chargeBody({ orderId: openOrder }));
    await expect(refusedLate).rejects.toMatchObject({ paymentKey: openKey });
    const { rows } = await db.pool.query<{ payment_key: string }>(
      'SELECT payment_key FROM order_claims WHERE merchant_id = $1 AND order_id = $2',
      [h.a.id, openOrder],
    );
    expect(rows).toEqual([]);
    expect(chargesOf(openOrder)).toBe(0);
    expect(chargesOf(orderId)).toBe(1);
  }, 60_000);

  it('a claim whose start never came (its process died) holds the order for its window only', async () => {
    const orderId = `order_${randomUUID()}`;
    const ghost = newKey();
    expect(await claims.claim(h.a.id, orderId, ghost, 60_000)).toMatchObject({ paymentKey: ghost, ours: true });
    const refused = apiProcess().charge(h.a.id, newKey(), chargeBody({ orderId }));
    await expect(refused).rejects.toMatchObject({ paymentKey: ghost });
    expect(chargesOf(orderId)).toBe(0);

    // With a window of 300 ms, the same claim no longer holds anything once that has passed: visibility decides.
    await new Promise((resolve) => setTimeout(resolve, 400));
    const paid = await apiProcess({ windowMs: 300 }).charge(h.a.id, newKey(), chargeBody({ orderId }));
    expect(paid.view.status).toBe('succeeded');
    expect(chargesOf(orderId)).toBe(1);
  }, 60_000);

  it('a claim the database cannot take is a database failure (the API answers 503): nothing started', async () => {
    const closed = await closedPort();
    const unreachable = new pg.Pool({ connectionString: `postgres://postgres@127.0.0.1:${closed}/none`, max: 1 });
    try {
      const client = new PaymentsClient(env.client, {
        taskQueue: h.taskQueue,
        timings,
        providers: ['simulator'],
        orderClaims: new OrderClaims(unreachable),
      });
      const key = newKey();
      const orderId = `order_${randomUUID()}`;
      const failed = await client.charge(h.a.id, key, chargeBody({ orderId })).catch((err: unknown) => err);
      expect(isDatabaseError(failed)).toBe(true);
      await expect(env.client.workflow.getHandle(chargeWorkflowId(h.a.id, key)).describe()).rejects.toBeInstanceOf(
        WorkflowNotFoundError,
      );
      expect(h.ledger().requests.filter((r) => r.reference === orderId)).toEqual([]);
    } finally {
      await unreachable.end();
    }
  });

  it('a visibility list that fails while the claim waits ends the charge with its failure, gives the claim back, and ends no process', async () => {
    // In a process of its own: an unhandled rejection ends a Node process (not visible from inside a jest test).
    const fixture = path.join(__dirname, 'fixtures', 'claim-while-list-fails.ts');
    const address = process.env[DEV_SERVER_ADDRESS_ENV] ?? '';
    const { code, stdout, stderr } = await new Promise<{ code: number | null; stdout: string; stderr: string }>(
      (resolve) => {
        const child = spawn(process.execPath, ['--import', 'tsx', fixture, address, db.url, h.a.id], {
          stdio: ['ignore', 'pipe', 'pipe'],
        });
        let out = '';
        let err = '';
        child.stdout.on('data', (d: Buffer) => (out += d.toString()));
        child.stderr.on('data', (d: Buffer) => (err += d.toString()));
        child.on('exit', (exitCode) => resolve({ code: exitCode, stdout: out, stderr: err }));
      },
    );
    expect({ code, stderr }).toEqual({ code: 0, stderr: '' });
    const result = JSON.parse(stdout.trim()) as { failure: string; claims: number };
    expect(result.failure).toMatch(/NOT_FOUND: Namespace no-such-namespace-/);
    expect(result.claims).toBe(0);
  }, 30_000);

  it('prunes claims older than an hour, and no younger one', async () => {
    const [old, fresh] = [`order_${randomUUID()}`, `order_${randomUUID()}`];
    await claims.claim(h.a.id, old, newKey(), 60_000);
    await claims.claim(h.a.id, fresh, newKey(), 60_000);
    await db.pool.query(
      "UPDATE order_claims SET claimed_at = now() - interval '61 minutes' WHERE merchant_id = $1 AND order_id = $2",
      [h.a.id, old],
    );
    expect(await claims.prune()).toBeGreaterThanOrEqual(1);
    const { rows } = await db.pool.query<{ order_id: string }>(
      'SELECT order_id FROM order_claims WHERE order_id = ANY($1)',
      [[old, fresh]],
    );
    expect(rows.map((r) => r.order_id)).toEqual([fresh]);
  });
});
