/** The domain is bundled into workflow code: prove it bundles and runs in the sandbox (zod 4 included). */
import { randomUUID } from 'node:crypto';
import { WorkflowFailedError, WorkflowUpdateFailedError } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import {
  DefaultLogger,
  Runtime,
  Worker,
  bundleWorkflowCode,
  type WorkflowBundleWithSourceMap,
} from '@temporalio/worker';
import { defaultPaymentTimings, submitUpdate, webhookSignal, type ProviderEvent } from '../../src/domain';
import { createTimeSkippingEnv } from '../helpers/servers';
import { domainSandboxWorkflow } from './fixtures/sandbox-workflow';

let env: TestWorkflowEnvironment;
let bundle: WorkflowBundleWithSourceMap;

beforeAll(async () => {
  try {
    // The expected workflow failure below is logged at WARN; keep the run quiet. Jest may reuse this process.
    Runtime.install({ logger: new DefaultLogger('ERROR') });
  } catch {
    // Already installed by an earlier file in this worker process.
  }
  [env, bundle] = await Promise.all([
    createTimeSkippingEnv(),
    bundleWorkflowCode({
      workflowsPath: require.resolve('./fixtures/sandbox-workflow'),
      logger: new DefaultLogger('WARN'),
    }),
  ]);
}, 120_000);

afterAll(async () => {
  await env?.teardown();
});

const input = (patch: Record<string, unknown> = {}) => ({
  merchantId: 'm_1',
  key: `k-${randomUUID()}`,
  fingerprint: 'f'.repeat(64),
  request: { orderId: 'o-1', amount: { value: 100, currency: 'EUR' }, paymentMethod: 'pm_x' },
  timings: defaultPaymentTimings,
  retry: { create: { budgetMs: 45_000 } },
  ...patch,
});

const event: ProviderEvent = {
  eventId: 'evt_1',
  type: 'payment.succeeded',
  created: 1,
  payment: {
    id: 'pay_1',
    status: 'succeeded',
    amount: 100,
    amountCaptured: 100,
    amountRefunded: 0,
    currency: 'EUR',
    reference: 'o-1',
    created: 1,
  },
};

it('parses, validates updates and derives retry options inside the workflow sandbox', async () => {
  const taskQueue = `domain-${randomUUID()}`;
  const worker = await Worker.create({ connection: env.nativeConnection, taskQueue, workflowBundle: bundle });
  await worker.runUntil(async () => {
    const args = input();
    const handle = await env.client.workflow.start(domainSandboxWorkflow, {
      taskQueue,
      workflowId: `domain-${randomUUID()}`,
      args: [args],
    });
    const view = await handle.executeUpdate(submitUpdate, { args: [{ fingerprint: 'f'.repeat(64) }] });
    expect(view).toMatchObject({ status: 'pending', orderId: 'o-1', amount: { value: 100, currency: 'EUR' } });
    const reused = await handle
      .executeUpdate(submitUpdate, { args: [{ fingerprint: '0'.repeat(64) }] })
      .catch((e) => e);
    expect(reused).toBeInstanceOf(WorkflowUpdateFailedError);
    expect((reused as WorkflowUpdateFailedError).cause).toMatchObject({ type: 'IdempotencyKeyReused' });
    await handle.signal(webhookSignal, event);
    expect(await handle.result()).toEqual({ id: `charge:m_1:${args.key}`, budget: 45_000, events: ['evt_1'] });

    const bad = await env.client.workflow
      .execute(domainSandboxWorkflow, {
        taskQueue,
        workflowId: `domain-${randomUUID()}`,
        args: [input({ request: { orderId: '', amount: { value: 1.5, currency: 'eur' }, paymentMethod: 'pm_x' } })],
      })
      .catch((e: unknown) => e);
    expect(bad).toBeInstanceOf(WorkflowFailedError);
    const cause = (bad as WorkflowFailedError).cause;
    expect(cause).toBeInstanceOf(ApplicationFailure);
    expect(cause).toMatchObject({ type: 'ValidationError' });
    expect(cause?.message).toMatch(/orderId/);
  });
});
