/**
 * `npx tsx bench/rpc-cost.ts [N [OPEN]]`: CPU per call of the Temporal calls a charge makes around its update-with-start, on
 * a fresh dev server, this process and the server apart. The load bench's CPU per payment moves by a few ms between
 * back-to-back runs on a shared machine; these calls cost a few ms each, so they are priced here on their own, in
 * alternating batches (A B A B ...) so that a noisy neighbour hits every variant alike.
 *
 * Variants: the order check as two visibility lists (before) and as one; the describe that told a first request from a
 * repeat; each over the API's gRPC `Connection` (grpc-js) and over a `NativeConnection` (Rust core).
 */
import { randomUUID } from 'node:crypto';
import { Client, type ConnectionLike } from '@temporalio/client';
import { NativeConnection } from '@temporalio/worker';
import { startDevServer } from '../scripts/lib/dev-server';
import { paymentListQuery } from '../src/visibility';
import { MerchantIdAttr, OrderIdAttr, PaymentStatusAttr, ProviderAttr } from '../src/domain/search-attributes';
import { cpuSnapshot } from './resources';

const calls = Number(process.argv[2] ?? 400);
const openPayments = Number(process.argv[3] ?? 500);
const rounds = 4;

async function main(): Promise<void> {
  const env = await startDevServer();
  const native = await NativeConnection.connect({ address: env.address });
  try {
    const namespace = env.namespace ?? 'default';
    const clients: Record<string, Client> = {
      grpc: new Client({ connection: env.connection, namespace }),
      native: new Client({ connection: native as ConnectionLike, namespace }),
    };
    const merchant = `m_${randomUUID().slice(0, 8)}`;
    // Open payments (no worker polls their queue) that visibility holds, as it holds a bench scenario's; the last
    // one is the describe's target.
    const taskQueue = `nobody-${randomUUID()}`;
    let workflowId = '';
    for (let i = 0; i < openPayments; i += 10) {
      await Promise.all(
        Array.from({ length: 10 }, async () => {
          workflowId = `charge:${merchant}:${randomUUID()}`;
          await clients.grpc!.workflow.start('chargeWorkflow', {
            workflowId,
            taskQueue,
            args: [],
            memo: { fingerprint: 'f', startedBy: randomUUID() },
            typedSearchAttributes: [
              { key: PaymentStatusAttr, value: 'pending' },
              { key: MerchantIdAttr, value: merchant },
              { key: OrderIdAttr, value: `order_${randomUUID()}` },
              { key: ProviderAttr, value: 'simulator' },
            ],
          });
        }),
      );
    }
    const list = (client: Client, statuses: string) =>
      client.workflowService.listWorkflowExecutions({
        namespace,
        // A new order: nothing listed, as for nearly every charge.
        query: [
          paymentListQuery(merchant, { orderId: `order_${randomUUID()}` }),
          `ExecutionStatus = 'Running'`,
          `PaymentStatus IN (${statuses})`,
        ].join(' AND '),
        pageSize: 20,
      });
    const variants: Record<string, (client: Client) => Promise<unknown>> = {
      'order check, two lists': (c) => Promise.all([list(c, `'pending', 'unknown'`), list(c, `'needs_review'`)]),
      'order check, one list': (c) => list(c, `'pending', 'unknown', 'needs_review'`),
      describe: (c) => c.workflow.getHandle(workflowId).describe(),
    };
    const totals = new Map<string, { self: number; server: number; n: number }>();
    // Warm both connections and the server's caches.
    for (const client of Object.values(clients)) for (const run of Object.values(variants)) await run(client);
    for (let round = 0; round < rounds; round++) {
      for (const [kind, client] of Object.entries(clients)) {
        for (const [name, run] of Object.entries(variants)) {
          const from = cpuSnapshot();
          // Eight at a time, as requests overlap in the API under load.
          for (let i = 0; i < calls; i += 8) await Promise.all(Array.from({ length: 8 }, () => run(client)));
          const to = cpuSnapshot();
          const key = `${name} (${kind})`;
          const t = totals.get(key) ?? { self: 0, server: 0, n: 0 };
          t.self += to.selfMs - from.selfMs;
          t.server += (to.childrenMs ?? 0) - (from.childrenMs ?? 0);
          t.n += calls;
          totals.set(key, t);
        }
      }
    }
    // Then starts (a payment's start request: memo, search attributes; no worker): each adds an open workflow, which
    // would make the lists above dearer round by round, so they come last.
    const start = (client: Client) =>
      client.workflow.start('chargeWorkflow', {
        workflowId: `charge:${merchant}:${randomUUID()}`,
        taskQueue,
        args: [{ merchantId: merchant, key: randomUUID(), request: { orderId: randomUUID(), amount: 1_000 } }],
        memo: { fingerprint: randomUUID(), startedBy: randomUUID() },
        typedSearchAttributes: [
          { key: PaymentStatusAttr, value: 'pending' },
          { key: MerchantIdAttr, value: merchant },
          { key: OrderIdAttr, value: `order_${randomUUID()}` },
          { key: ProviderAttr, value: 'simulator' },
        ],
      });
    for (let round = 0; round < rounds; round++) {
      for (const [kind, client] of Object.entries(clients)) {
        const from = cpuSnapshot();
        for (let i = 0; i < calls / 4; i += 8) await Promise.all(Array.from({ length: 8 }, () => start(client)));
        const to = cpuSnapshot();
        const key = `start (${kind})`;
        const t = totals.get(key) ?? { self: 0, server: 0, n: 0 };
        t.self += to.selfMs - from.selfMs;
        t.server += (to.childrenMs ?? 0) - (from.childrenMs ?? 0);
        t.n += calls / 4;
        totals.set(key, t);
      }
    }
    console.log(
      `CPU ms per call (${rounds} x ${calls} calls each, starts ${calls / 4}, alternating; ${openPayments} open payments): node + Temporal`,
    );
    for (const [key, t] of totals) {
      const f = (x: number) => (x / t.n).toFixed(2);
      console.log(`${key.padEnd(40)} ${f(t.self)} + ${f(t.server)} = ${f(t.self + t.server)}`);
    }
  } finally {
    await native.close();
    await env.teardown();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
