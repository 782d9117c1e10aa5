/**
 * Retry settings a payment would fail on in workflow code (before anything is sent, reading as pending) are refused
 * when the client is built instead.
 */
import type { Client } from '@temporalio/client';
import { PaymentsClient } from '../../src/client';
import { defaultPaymentTimings } from '../../src/domain/workflow-inputs';

// The constructor only reads the namespace; no call reaches Temporal in these tests.
const client = { options: { namespace: 'default' } } as unknown as Client;
const capabilities = {
  simulator: { idempotencyKeys: true, keyTtlSeconds: 86_400, lookupByKey: true, lookupByReference: true },
};

it('refuses a retry override whose attempt cannot fit its budget, naming the operation', () => {
  expect(
    () =>
      new PaymentsClient(client, {
        taskQueue: 'q',
        timings: defaultPaymentTimings,
        capabilities,
        retry: { lookup: { attemptTimeoutMs: 15_000, budgetMs: 1_000 } },
      }),
  ).toThrow(/retry settings for lookup at simulator: .*attemptTimeoutMs must not exceed budgetMs/);
});

it('accepts the presets', () => {
  expect(
    () => new PaymentsClient(client, { taskQueue: 'q', timings: defaultPaymentTimings, capabilities }),
  ).not.toThrow();
});
