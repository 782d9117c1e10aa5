/**
 * The first workflow worker of query-before-task.test.ts, in its own process so the test can SIGKILL it: the real
 * workflow worker of src/stack.ts (createWorkers) for chargeWorkflow, polling `taskQueue` only (the provider's activity
 * worker runs in the test process). A SIGKILLed worker never tells the server it is gone, so the server keeps the
 * workflow sticky to this process's queue: that is what orders the query before the workflow task (see the test).
 * Spec (JSON in ND_WORKER_SPEC): temporalAddress, taskQueue, workflowBundlePath, simulatorUrl, apiKey,
 * stickyTimeoutMs. Prints `ready` once polling.
 */
import { DefaultLogger, NativeConnection, Runtime, type WorkerOptions } from '@temporalio/worker';
import pino from 'pino';
import { createWorkers } from '../../src/stack';
import { simulatorProvider } from '../helpers/worker-process';

export interface StickyWorkerSpec {
  readonly temporalAddress: string;
  readonly taskQueue: string;
  readonly workflowBundlePath: string;
  readonly simulatorUrl: string;
  readonly apiKey: string;
  /**
   * The worker's sticky schedule-to-start timeout (the SDK's `stickyQueueScheduleToStartTimeout`, default 10 s): how
   * long, once this worker is dead, the race's query and then its workflow task wait on its sticky queue.
   */
  readonly stickyTimeoutMs: number;
}

async function main() {
  const spec = JSON.parse(process.env.ND_WORKER_SPEC ?? '') as StickyWorkerSpec;
  Runtime.install({ logger: new DefaultLogger('WARN') });
  const logger = pino({ level: 'silent' });
  const connection = await NativeConnection.connect({ address: spec.temporalAddress });
  // createWorkers hands `workflows` on to the workflow worker's options, so the test's sticky timeout goes along with the
  // bundle. It is no product setting: a dead worker's next task must wait at least LOCAL_RERUN_GAP_MS (10 s) before
  // another worker takes it (src/activities/contract.ts), which the SDK's default keeps.
  const workflows: Pick<WorkerOptions, 'workflowBundle' | 'stickyQueueScheduleToStartTimeout'> = {
    workflowBundle: { codePath: spec.workflowBundlePath },
    stickyQueueScheduleToStartTimeout: spec.stickyTimeoutMs,
  };
  const workers = await createWorkers({
    connection,
    namespace: 'default',
    taskQueue: spec.taskQueue,
    providers: { simulator: simulatorProvider(spec.simulatorUrl, spec.apiKey, logger) },
    logger,
    workflows,
  });
  // [workflow worker, provider worker]: only the first polls here.
  const workflowWorker = workers[0];
  if (!workflowWorker) throw new Error('createWorkers made no workflow worker');
  const running = workflowWorker.run();
  process.stdout.write('ready\n');
  await running;
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
