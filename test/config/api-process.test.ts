/**
 * Which process reads which settings: the API process (src/api-main.ts: the configured stack with the API only) uses
 * the provider names and never the provider capabilities or the RETRY_* presets, which are the worker's. Its payments
 * carry neither in their input (shape 3: the worker records its own in the payment's first workflow task).
 */
import { randomUUID } from 'node:crypto';
import { defaultPayloadConverter } from '@temporalio/common';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import pino from 'pino';
import { AesGcmPayloadCodec } from '../../src/codec';
import { type Config, loadConfig } from '../../src/config';
import { chargeWorkflowId } from '../../src/domain/ids';
import type { ChargeWorkflowInput } from '../../src/domain/workflow-inputs';
import { startConfiguredStack } from '../../src/stack';
import { connectDevServer } from '../helpers/servers';
import { postCharge } from '../helpers/api-charge';

let env: TestWorkflowEnvironment;
beforeAll(async () => {
  env = await connectDevServer();
});
afterAll(async () => {
  await env?.teardown();
});

/** The configuration with `names` made unreadable: reading one throws. */
const withUnreadable = (config: Config, names: readonly (keyof Config)[]): Config => {
  const copy = { ...config };
  for (const name of names) {
    Object.defineProperty(copy, name, {
      get: () => {
        throw new Error(`the API process read ${name}`);
      },
    });
  }
  return copy;
};

it('the API process reads neither RETRY_* nor the provider capabilities, and its payments carry neither', async () => {
  const loaded = loadConfig({
    TEMPORAL_ADDRESS: env.address,
    // No worker polls this queue: the payment starts and waits (202), which is all this test looks at.
    TASK_QUEUE: `api-process-${randomUUID()}`,
    HOST: '127.0.0.1',
    PORT: '0',
    SUBMIT_WAIT_MS: '300',
    RETRY_CREATE_BUDGET_MS: '90000',
    RETRY_INITIAL_INTERVAL_MS: '300',
    PROVIDER_KEY_TTL_S: '86400',
  });
  // The settings are there (the worker reads them from the same environment)...
  expect(loaded.retry.create).toMatchObject({ budgetMs: 90_000, initialIntervalMs: 300 });
  // ...but the API process must not touch them.
  const config = withUnreadable(loaded, ['retry', 'providerCapabilities']);
  const stack = await startConfiguredStack(config, pino({ level: 'silent' }), { api: true });
  const key = `key_${randomUUID()}`;
  const merchantId = loaded.API_TOKENS[0]?.merchantId ?? '';
  const workflowId = chargeWorkflowId(merchantId, key);
  try {
    const res = await postCharge(stack.api?.url, loaded.API_TOKENS[0]?.token, key);
    expect(res.status).toBe(202);
    const events = (await env.client.workflow.getHandle(workflowId).fetchHistory()).events ?? [];
    const encrypted = events[0]?.workflowExecutionStartedEventAttributes?.input?.payloads ?? [];
    const [payload] = await new AesGcmPayloadCodec(loaded.payloadKeys).decode(encrypted);
    const input = defaultPayloadConverter.fromPayload<ChargeWorkflowInput>(payload as NonNullable<typeof payload>);
    expect(input).toMatchObject({ merchantId, key, shape: 3 });
    expect(input).not.toHaveProperty('retry');
    expect(input).not.toHaveProperty('capabilities');
  } finally {
    await env.client.workflow
      .getHandle(workflowId)
      .terminate('test over')
      .catch(() => undefined);
    await stack.close();
  }
});
