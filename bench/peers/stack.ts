/**
 * The two peers of the bench, each behind the same kind of HTTP endpoint as ours (`POST /v1/payments` with an
 * `Idempotency-Key`, driven by the same load generator), against the same simulator and provider adapter:
 *
 * - `bare-workflow`: the handler runs `client.workflow.execute` of {@link bareChargeWorkflow} (one activity on the
 *   workflow's own task queue, as the samples do) and answers its result;
 * - `no-engine`: the handler calls the provider itself with the derived key (the floor: what durability costs).
 *
 * No update, no webhooks (the simulator merchant has no webhook URL), no search attributes, no input validation
 * beyond what the handler needs: what a user would otherwise write.
 */
import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { Worker } from '@temporalio/worker';
import Fastify from 'fastify';
import { createProvider, simulatorCapabilities } from '../../src/providers';
import { type BenchInfra, type ScenarioStack, runClosers } from '../stack';
import { type BareChargeInput, createBareActivities, createPaymentWithKey } from './bare-activities';
import type { bareChargeWorkflow } from './bare-workflow';

export type PeerKind = 'bare-workflow' | 'no-engine';

/** Workflow id of a bare-workflow payment (its own prefix: never collides with `charge:`). */
export const bareWorkflowId = (merchantId: string, key: string): string => `bare-charge:${merchantId}:${key}`;

interface ChargeBody {
  readonly orderId: string;
  readonly amount: { readonly value: number; readonly currency: string };
  readonly paymentMethod: string;
}

/** Starts a peer's endpoint (and, for `bare-workflow`, its worker) on a fresh simulator merchant and task queue. */
export async function startPeerStack(infra: BenchInfra, kind: PeerKind, name: string): Promise<ScenarioStack> {
  const apiKey = `sk_bench_${randomUUID()}`;
  const merchantId = `bench_${randomUUID().slice(0, 8)}`;
  const taskQueue = `bench-${name}-${randomUUID().slice(0, 8)}`;
  const provider = createProvider(
    {
      name: 'simulator',
      baseUrl: infra.sim.url,
      apiKey,
      capabilities: simulatorCapabilities(),
      connectTimeoutMs: 2_000,
      totalTimeoutMs: 10_000,
    },
    infra.logger,
  );
  const closers: (() => Promise<void>)[] = [() => provider.close()];
  try {
    await infra.sim.setMerchant(apiKey, { idempotency: true });
    const app = Fastify({ logger: false });
    closers.unshift(() => app.close());
    const client = infra.env.client;
    let worker: Worker | undefined;
    if (kind === 'bare-workflow') {
      worker = await Worker.create({
        connection: infra.env.nativeConnection,
        namespace: infra.namespace,
        taskQueue,
        workflowBundle: await infra.bareBundle(),
        activities: createBareActivities(provider),
      });
      const running = worker.run();
      const w = worker;
      // After the endpoint, before the provider.
      closers.splice(1, 0, async () => {
        if (w.getState() === 'RUNNING') w.shutdown();
        await running;
      });
    }
    app.post('/v1/payments', async (request, reply) => {
      const key = request.headers['idempotency-key'];
      const body = request.body as ChargeBody;
      if (typeof key !== 'string' || !body?.orderId || !body.amount) return reply.code(400).send({ error: 'bad' });
      const input: BareChargeInput = {
        merchantId,
        key,
        orderId: body.orderId,
        amount: body.amount.value,
        currency: body.amount.currency,
        paymentMethod: body.paymentMethod,
      };
      const result =
        kind === 'bare-workflow'
          ? await client.workflow.execute<typeof bareChargeWorkflow>('bareChargeWorkflow', {
              workflowId: bareWorkflowId(merchantId, key),
              taskQueue,
              args: [input],
            })
          : await createPaymentWithKey(provider, input, 1);
      return reply.code(result.status === 'declined' ? 402 : 200).send({ key, ...result });
    });
    await app.listen({ port: 0, host: '127.0.0.1' });
    const url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
    let closing: Promise<void> | undefined;
    return {
      taskQueue,
      url,
      apiKey,
      merchantId,
      token: '',
      app,
      provider,
      close: () => (closing ??= runClosers(closers)),
    };
  } catch (err) {
    await runClosers(closers);
    throw err;
  }
}
