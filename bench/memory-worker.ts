/**
 * The worker process of `npm run bench -- --memory`: the production worker (src/stack.ts: workflow worker and the
 * provider's activity worker) and nothing else, started by bench/memory.ts with `--expose-gc`. It answers the parent's
 * `measure` message with its memory after a full GC, so the parent can tell what each open payment costs it.
 *
 * Env (set by the parent): MEMORY_TEMPORAL_ADDRESS, MEMORY_NAMESPACE, MEMORY_TASK_QUEUE, MEMORY_SIMULATOR_URL,
 * MEMORY_PROVIDER_API_KEY, MEMORY_BUNDLE_PATH, MEMORY_MAX_CACHED (optional), MEMORY_REUSE_V8_CONTEXT (optional).
 */
import { readFileSync } from 'node:fs';
import { DefaultLogger, NativeConnection, Runtime } from '@temporalio/worker';
import pino from 'pino';
import { createProvider, simulatorCapabilities } from '../src/providers';
import { startStack } from '../src/stack';

/** What the parent asks and what this process answers over IPC. */
export type MemoryRequest = { readonly type: 'measure' } | { readonly type: 'stop' };
export interface MemoryReport {
  readonly type: 'memory';
  readonly rssMiB: number;
  readonly heapUsedMiB: number;
  readonly externalMiB: number;
  readonly arrayBuffersMiB: number;
}

const MiB = 1024 * 1024;
const need = (name: string): string => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set (bench/memory-worker.ts is started by bench/memory.ts)`);
  return v;
};

/** VmRSS from /proc (what the kernel charges), else Node's own figure. */
function rssMiB(): number {
  try {
    const kb = /^VmRSS:\s+(\d+)\s+kB$/m.exec(readFileSync('/proc/self/status', 'utf8'))?.[1];
    if (kb) return Number(kb) / 1024;
  } catch {
    // not Linux
  }
  return process.memoryUsage().rss / MiB;
}

async function measure(): Promise<MemoryReport> {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (!gc) throw new Error('start with --expose-gc');
  // Several rounds with pauses: finalizers of workflow contexts and native buffers are released asynchronously.
  for (let i = 0; i < 4; i++) {
    gc();
    await new Promise((r) => setTimeout(r, 100));
  }
  const m = process.memoryUsage();
  return {
    type: 'memory',
    rssMiB: rssMiB(),
    heapUsedMiB: m.heapUsed / MiB,
    externalMiB: m.external / MiB,
    arrayBuffersMiB: m.arrayBuffers / MiB,
  };
}

async function main(): Promise<void> {
  Runtime.install({ logger: new DefaultLogger('ERROR') });
  const logger = pino({ level: 'silent' });
  const provider = createProvider(
    {
      name: 'simulator',
      baseUrl: need('MEMORY_SIMULATOR_URL'),
      apiKey: need('MEMORY_PROVIDER_API_KEY'),
      capabilities: simulatorCapabilities(),
      connectTimeoutMs: 2_000,
      totalTimeoutMs: 10_000,
    },
    logger,
  );
  const connection = await NativeConnection.connect({ address: need('MEMORY_TEMPORAL_ADDRESS') });
  const maxCached = process.env.MEMORY_MAX_CACHED;
  const reuse = process.env.MEMORY_REUSE_V8_CONTEXT;
  const stack = await startStack({
    logger,
    namespace: need('MEMORY_NAMESPACE'),
    taskQueue: need('MEMORY_TASK_QUEUE'),
    nativeConnection: connection,
    workers: {
      providers: { simulator: provider },
      workflows: { workflowBundle: { codePath: need('MEMORY_BUNDLE_PATH') } },
      workflowCache: {
        ...(maxCached ? { maxCachedWorkflows: Number(maxCached) } : {}),
        ...(reuse ? { reuseV8Context: reuse === '1' } : {}),
      },
    },
    closers: [() => provider.close(), () => connection.close()],
  });
  const workers = await stack.createWorkers();
  const running = stack.run();
  process.on('message', (msg: MemoryRequest) => {
    if (msg.type === 'measure') {
      measure().then(
        (report) => process.send?.(report),
        (err: unknown) => process.send?.({ type: 'error', message: String(err) }),
      );
    } else if (msg.type === 'stop') {
      for (const w of workers) if (w.getState() === 'RUNNING') w.shutdown();
    }
  });
  process.send?.({ type: 'ready' });
  await running;
  await stack.close();
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
