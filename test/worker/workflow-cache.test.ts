/**
 * `WORKER_MAX_CACHED_WORKFLOWS` bounds what a worker process keeps in memory: the SDK's default cache grows with the
 * open payments (measured at 2,310 per process on a 4 GiB heap, README "Growth"), this setting caps it. Seen through
 * the configured stack, as `npm run worker` builds it: open payments waiting for their capture, then the workers'
 * own count of cached workflows.
 */
import { randomUUID } from 'node:crypto';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { NativeConnection } from '@temporalio/worker';
import pino from 'pino';
import { loadConfig } from '../../src/config';
import { createPaymentWorkers } from '../../src/payment-workers';
import { createProvider, simulatorCapabilities } from '../../src/providers';
import { chargeWorkflowId } from '../../src/domain/ids';
import { startSimulator, type RunningSimulator } from '../../src/simulator/server';
import { startConfiguredStack } from '../../src/stack';
import { connectDevServer } from '../helpers/servers';
import { postCharge } from '../helpers/api-charge';
import { workflowBundlePath } from '../helpers/workflow-bundle';

let env: TestWorkflowEnvironment;
let sim: RunningSimulator;
beforeAll(async () => {
  [env, sim] = await Promise.all([connectDevServer(), startSimulator({ port: 0 })]);
});
afterAll(async () => {
  await sim?.close();
  await env?.teardown();
});

/** Opens `count` manual-capture payments through a configured stack; answers the workers' cached workflows. */
async function cachedAfterOpening(count: number, maxCached: string | undefined): Promise<number> {
  const config = loadConfig({
    TEMPORAL_ADDRESS: env.address,
    TASK_QUEUE: `cache-${randomUUID()}`,
    SIMULATOR_URL: sim.url,
    WORKFLOW_BUNDLE_PATH: await workflowBundlePath(),
    HOST: '127.0.0.1',
    PORT: '0',
    ...(maxCached === undefined ? {} : { WORKER_MAX_CACHED_WORKFLOWS: maxCached }),
  });
  const stack = await startConfiguredStack(config, pino({ level: 'silent' }), { api: true, workers: true });
  const merchant = config.API_TOKENS[0];
  const keys: string[] = [];
  try {
    await stack.startWorkers();
    for (let i = 0; i < count; i += 1) {
      const key = `cache-${randomUUID()}`;
      keys.push(key);
      const res = await postCharge(stack.api?.url, merchant?.token, key, { capture: 'manual' });
      expect(res.status).toBe(200);
      expect(((await res.json()) as { status: string }).status).toBe('authorized');
    }
    const workers = await stack.createWorkers();
    return Math.max(...workers.map((w) => w.getStatus().numCachedWorkflows));
  } finally {
    await Promise.all(
      keys.map((key) =>
        env.client.workflow
          .getHandle(chargeWorkflowId(merchant?.merchantId ?? '', key))
          .terminate('test over')
          .catch(() => undefined),
      ),
    );
    await stack.close();
  }
}

it('keeps at most WORKER_MAX_CACHED_WORKFLOWS payments in a worker’s cache; without it, every open one', async () => {
  expect(await cachedAfterOpening(5, '2')).toBe(2);
  expect(await cachedAfterOpening(5, undefined)).toBe(5);
});

it('refuses a worker without a workflow cache: its payments’ first tasks run local activities', async () => {
  // The configuration refuses WORKER_MAX_CACHED_WORKFLOWS=0 (test/config); the package's workers refuse it too, before
  // any worker polls.
  const connection = await NativeConnection.connect({ address: env.address });
  try {
    const simulator = createProvider({
      name: 'simulator',
      baseUrl: sim.url,
      apiKey: 'sk_cache',
      capabilities: simulatorCapabilities(),
      connectTimeoutMs: 2_000,
      totalTimeoutMs: 10_000,
    });
    await expect(
      createPaymentWorkers({
        connection,
        taskQueue: `cache-${randomUUID()}`,
        providers: { simulator },
        workflows: { workflowBundle: { codePath: await workflowBundlePath() } },
        workflowCache: { maxCachedWorkflows: 0 },
        sweep: false,
        logger: pino({ level: 'silent' }),
      }),
    ).rejects.toThrow('workflowCache.maxCachedWorkflows must be at least 1');
  } finally {
    await connection.close();
  }
});
