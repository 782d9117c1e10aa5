/**
 * The failover counter (`payments_failovers_total{from,to,reason}`): a charge moved to its fallback through the API is
 * counted once by the worker that ran the move, through a workflow sink; a replay of the payment's history (what a
 * worker does after a cache eviction or a restart) counts nothing. The same scenario as test/scenarios/failover.test.ts: a
 * primary whose port refuses connections (`down`), a real simulator as the fallback (`backup`), the run's dev server.
 */
import { randomUUID } from 'node:crypto';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker } from '@temporalio/worker';
import pino from 'pino';
import { Registry } from 'prom-client';
import { chargeWorkflowId } from '../../src/domain/ids';
import type { PaymentView } from '../../src/domain/payment';
import { type RestProvider, createProvider, simulatorCapabilities } from '../../src/providers';
import { type RunningSimulator, startSimulator } from '../../src/simulator/server';
import { type WorkerMetrics, createWorkerMetrics, paymentSinks } from '../../src/metrics/worker-metrics';
import { type ApiWorld, chargeBody, newKey, startWorld } from '../helpers/world';
import { workflowBundle } from '../helpers/payments';
import { refusingProvider } from '../helpers/refusing-provider';
import { connectDevServer } from '../helpers/servers';

let env: TestWorkflowEnvironment;
let h: ApiWorld;
let backupSim: RunningSimulator;
const backupApiKey = `sk_test_backup_${randomUUID()}`;
let backup: RestProvider;
let down: RestProvider;
/** The workers' metrics, as the worker process serves them on its metrics port. */
let metrics: WorkerMetrics;

beforeAll(async () => {
  const logger = pino({ level: process.env.TEST_LOG_LEVEL ?? 'silent' });
  backupSim = await startSimulator({ port: 0 });
  await backupSim.setMerchant(backupApiKey, { idempotency: true });
  backup = createProvider(
    {
      name: 'backup',
      baseUrl: backupSim.url,
      apiKey: backupApiKey,
      capabilities: simulatorCapabilities(),
      connectTimeoutMs: 500,
      totalTimeoutMs: 1_500,
    },
    logger,
  );
  down = await refusingProvider('down', logger);
  metrics = createWorkerMetrics(new Registry());
  env = await connectDevServer();
  h = await startWorld(env, { api: true, extraProviders: { backup, down }, webhooks: false, workerMetrics: metrics });
}, 120_000);
afterAll(async () => {
  await h?.close();
  await backup?.close();
  await down?.close();
  await backupSim?.close();
  await env?.teardown();
});

/** The counter's series as the metrics endpoint shows them (`name{labels} value` lines). */
const failoverLines = async (): Promise<string[]> =>
  (await metrics.registry.metrics()).split('\n').filter((l) => l.startsWith('payments_failovers_total{'));

it('a failover through the API (closed port at the primary, authorized at the fallback) counts once; a replay of its history counts nothing', async () => {
  expect(await failoverLines()).toEqual([]);
  const key = newKey();
  const body = chargeBody({ provider: 'down', fallbackProviders: ['backup'], capture: 'manual' });

  const answer = await h.request('POST', '/v1/payments', { key, body });

  expect(answer.status).toBe(200);
  const view = answer.body as unknown as PaymentView;
  expect(view).toMatchObject({ status: 'authorized', provider: 'backup' });
  expect(view.failovers?.map((f) => [f.from, f.to, f.reason])).toEqual([['down', 'backup', 'connect_refused']]);
  expect(await failoverLines()).toEqual([
    'payments_failovers_total{from="down",to="backup",reason="connect_refused"} 1',
  ]);

  // The payment's whole history so far, replayed with the worker's own sinks on the same metrics: the sink call at the
  // move is in the replayed code path, and the worker does not call it.
  const workflowId = chargeWorkflowId(h.a.id, key);
  const history = await env.client.workflow.getHandle(workflowId).fetchHistory();
  await Worker.runReplayHistory({ workflowBundle: await workflowBundle(), sinks: paymentSinks(metrics) }, history);

  expect(await failoverLines()).toEqual([
    'payments_failovers_total{from="down",to="backup",reason="connect_refused"} 1',
  ]);
});
