/**
 * The client knows providers by name only: capabilities and retry presets are the workers' (every payment records
 * them in its first workflow task, shape 3), so retry settings a payment would fail on in workflow code (before
 * anything is sent, reading as pending) are refused when the workers are built, not by the client.
 */
import type { Client } from '@temporalio/client';
import type { NativeConnection } from '@temporalio/worker';
import pino from 'pino';
import { PaymentsClient, type PaymentsClientOptions } from '../../src/client';
import { defaultPaymentTimings } from '../../src/domain/workflow-inputs';
import { createProvider, simulatorCapabilities } from '../../src/providers';
import { createWorkers } from '../../src/stack';

// The constructor only reads the namespace; no call reaches Temporal in these tests.
const client = { options: { namespace: 'default' } } as unknown as Client;
const logger = pino({ level: 'silent' });

describe('PaymentsClient options', () => {
  it('takes provider names, no capabilities and no retry presets', () => {
    const options: PaymentsClientOptions = {
      taskQueue: 'q',
      timings: defaultPaymentTimings,
      providers: ['simulator', 'stripe'],
    };
    expect(() => new PaymentsClient(client, options)).not.toThrow();
    const withCapabilities: PaymentsClientOptions = {
      taskQueue: 'q',
      timings: defaultPaymentTimings,
      // @ts-expect-error the worker owns the providers' capabilities
      capabilities: { simulator: simulatorCapabilities() },
    };
    const withRetry: PaymentsClientOptions = {
      taskQueue: 'q',
      timings: defaultPaymentTimings,
      // @ts-expect-error the worker owns the retry presets (RETRY_*)
      retry: { create: { budgetMs: 10_000 } },
    };
    // The type refuses them (tsc fails on an unused @ts-expect-error); passed anyway, from JavaScript, nothing reads them.
    for (const ignored of [withCapabilities, withRetry])
      expect(() => new PaymentsClient(client, ignored)).not.toThrow();
  });

  it('refuses a default provider that is not one of its providers', () => {
    expect(
      () =>
        new PaymentsClient(client, {
          taskQueue: 'q',
          timings: defaultPaymentTimings,
          providers: ['simulator'],
          defaultProvider: 'stripe',
        }),
    ).toThrow(/defaultProvider stripe is not one of the providers/);
  });
});

describe("the workers' retry presets", () => {
  it('refuses a retry override whose attempt cannot fit its budget when the workers are built, naming the operation', async () => {
    const provider = createProvider(
      {
        name: 'simulator',
        baseUrl: 'http://127.0.0.1:9',
        apiKey: 'sk_test_options',
        capabilities: simulatorCapabilities(),
        connectTimeoutMs: 500,
        totalTimeoutMs: 1_500,
      },
      logger,
    );
    try {
      await expect(
        createWorkers({
          // Refused before any worker is created: nothing reaches this connection.
          connection: {} as NativeConnection,
          namespace: 'default',
          taskQueue: 'q',
          providers: { simulator: provider },
          logger,
          workflows: { workflowsPath: require.resolve('../../src/workflows') },
          retry: { lookup: { attemptTimeoutMs: 15_000, budgetMs: 1_000 } },
        }),
      ).rejects.toThrow(/retry settings for lookup at simulator: .*attemptTimeoutMs must not exceed budgetMs/);
    } finally {
      await provider.close?.();
    }
  });
});
