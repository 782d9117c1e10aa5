/**
 * Shared Temporal server plumbing for tests. The jest global setup resolves both executables once and starts one dev
 * server; test files reach them through these helpers.
 */
import { encodeSearchAttributeIndexedValueType } from '@temporalio/common/lib/search-attributes';
import { temporal } from '@temporalio/proto';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { paymentSearchAttributes } from '../../src/domain/search-attributes';
import { TEMPORAL_TEST_SERVER, resolveBinary, startWith } from '../../scripts/lib/temporal-binaries';
import { singleBoxDynamicConfig } from '../../scripts/lib/dev-server';

/** Env var through which the global setup hands the dev server's address to the test workers. */
export const DEV_SERVER_ADDRESS_ENV = 'PW_TEST_DEV_SERVER_ADDRESS';

/**
 * The dynamic config of the run's dev server (and of a test's own, where it needs other limits on top). The dev server
 * records how far its task queues got (the ack levels) every 30 s by default, and deleting a workflow waits until they
 * show its close handled: a workflow deleted right after it closed stayed describable for 10-19 s. Temporal's own
 * delete tests record them every second, as here.
 */
export const testDynamicConfig = {
  ...singleBoxDynamicConfig,
  'history.transferProcessorUpdateAckInterval': '1s',
  'history.visibilityProcessorUpdateAckInterval': '1s',
};

/**
 * A fresh time-skipping test server for one test file. Each file gets its own process because skipped time is global
 * to a server: two files skipping time on one server would corrupt each other's timers.
 */
export async function createTimeSkippingEnv(): Promise<TestWorkflowEnvironment> {
  const resolved = await resolveBinary(TEMPORAL_TEST_SERVER);
  const env = await startWith(resolved, TEMPORAL_TEST_SERVER, (executable) =>
    TestWorkflowEnvironment.createTimeSkipping({ server: { executable } }),
  );
  // The payment workflows upsert these; the test server, like any namespace, must know them first.
  await env.connection.operatorService.addSearchAttributes({
    namespace: env.namespace ?? 'default',
    searchAttributes: Object.fromEntries(
      paymentSearchAttributes.map((k) => [
        k.name,
        encodeSearchAttributeIndexedValueType(k.type) ??
          temporal.api.enums.v1.IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
      ]),
    ),
  });
  return env;
}

/** A connection to the run's shared dev server (updates, visibility, schedules). Tear it down after the file. */
export async function connectDevServer(): Promise<TestWorkflowEnvironment> {
  const address = process.env[DEV_SERVER_ADDRESS_ENV];
  if (!address) throw new Error(`${DEV_SERVER_ADDRESS_ENV} is not set: run the tests through jest (global setup)`);
  return TestWorkflowEnvironment.createFromExistingServer({ address, namespace: 'default' });
}
