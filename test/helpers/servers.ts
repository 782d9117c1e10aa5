/**
 * Shared Temporal server plumbing for tests. The jest global setup resolves both executables once and starts one dev
 * server; test files reach them through these helpers.
 */
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { TEMPORAL_TEST_SERVER, resolveBinary, startWith } from '../../scripts/lib/temporal-binaries';

/** Env var through which the global setup hands the dev server's address to the test workers. */
export const DEV_SERVER_ADDRESS_ENV = 'PW_TEST_DEV_SERVER_ADDRESS';

/**
 * A fresh time-skipping test server for one test file. Each file gets its own process because skipped time is global
 * to a server: two files skipping time on one server would corrupt each other's timers.
 */
export async function createTimeSkippingEnv(): Promise<TestWorkflowEnvironment> {
  const resolved = await resolveBinary(TEMPORAL_TEST_SERVER);
  return startWith(resolved, TEMPORAL_TEST_SERVER, (executable) =>
    TestWorkflowEnvironment.createTimeSkipping({ server: { executable } }),
  );
}

/** A connection to the run's shared dev server (updates, visibility, schedules). Tear it down after the file. */
export async function connectDevServer(): Promise<TestWorkflowEnvironment> {
  const address = process.env[DEV_SERVER_ADDRESS_ENV];
  if (!address) throw new Error(`${DEV_SERVER_ADDRESS_ENV} is not set: run the tests through jest (global setup)`);
  return TestWorkflowEnvironment.createFromExistingServer({ address, namespace: 'default' });
}
