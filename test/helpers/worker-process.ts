/**
 * A second worker process for multi-process tests (the SDK allows one worker per task queue per process): the real
 * `createBreaker` + `createWorkers` of src/worker.ts, configured by the JSON in PW_WORKER_SPEC. Prints `ready` once
 * polling, drains on SIGTERM, then prints `{"creates":N}`: how many creates this process sent to the provider.
 */
import { DefaultLogger, NativeConnection, Runtime } from '@temporalio/worker';
import pino from 'pino';
import { createProvider, simulatorCapabilities } from '../../src/providers';
import type { PaymentProvider } from '../../src/providers/types';
import { createBreaker, createWorkers, runWorkers } from '../../src/worker';
import type { BreakerOptions } from '../../src/activities';

export interface WorkerProcessSpec {
  readonly temporalAddress: string;
  readonly taskQueue: string;
  readonly workflowBundlePath: string;
  readonly simulatorUrl: string;
  readonly apiKey: string;
  readonly redisUrl: string;
  readonly keyPrefix: string;
  readonly breaker: Required<
    Pick<BreakerOptions, 'failureThreshold' | 'window' | 'cooldownMs' | 'probeTimeoutMs' | 'jitterMs'>
  >;
}

/** A provider that counts the creates it sent. */
export const counted = (provider: PaymentProvider, calls: { creates: number }): PaymentProvider =>
  new Proxy(provider, {
    get(target, prop) {
      const value: unknown = Reflect.get(target, prop, target);
      if (typeof value !== 'function') return value;
      return (...args: unknown[]) => {
        if (prop === 'createPayment') calls.creates += 1;
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });

async function main() {
  const spec = JSON.parse(process.env.PW_WORKER_SPEC ?? '') as WorkerProcessSpec;
  Runtime.install({ logger: new DefaultLogger('WARN') });
  const logger = pino({ level: process.env.TEST_LOG_LEVEL ?? 'silent' });
  const connection = await NativeConnection.connect({ address: spec.temporalAddress });
  const breaker = await createBreaker(
    { REDIS_URL: spec.redisUrl, REDIS_KEY_PREFIX: spec.keyPrefix, breaker: spec.breaker },
    logger,
  );
  const provider = createProvider({
    name: 'simulator',
    baseUrl: spec.simulatorUrl,
    apiKey: spec.apiKey,
    capabilities: simulatorCapabilities(86_400),
    connectTimeoutMs: 1_000,
    totalTimeoutMs: 2_000,
    logger,
  });
  const calls = { creates: 0 };
  const workers = await createWorkers({
    connection,
    namespace: 'default',
    taskQueue: spec.taskQueue,
    providers: { simulator: counted(provider, calls) },
    logger,
    workflows: { workflowBundle: { codePath: spec.workflowBundlePath } },
    breaker: breaker.breaker,
  });
  process.once('SIGTERM', () => workers.forEach((w) => w.shutdown()));
  const running = runWorkers(workers);
  process.stdout.write('ready\n');
  await running;
  process.stdout.write(`${JSON.stringify(calls)}\n`);
  await breaker.close();
  await provider.close();
  await connection.close();
}

if (require.main === module) {
  main().then(
    () => process.exit(0),
    (err: unknown) => {
      console.error(err);
      process.exit(1);
    },
  );
}
