/**
 * Installs the Temporal Runtime every test file's workers, connections and test servers use: worker lifecycle INFO
 * lines and the test server's capability warnings would bury test output; errors still show.
 *
 * Installed when a file first loads the runtime's module, not here: importing it here (it was `@temporalio/worker`'s
 * index) cost every test file the Temporal SDK's load (the worker, its protos and native bridge: about 0.5 s of CPU
 * per file, as jest evaluates modules again in every file), and about 60 of the 142 files never use it. Everything
 * that can reach the Runtime (a Worker, a NativeConnection, a TestWorkflowEnvironment, `Runtime.instance()`) loads
 * this module first, so the Runtime is installed before anything can instantiate it, as before; a file that never
 * loads it pays nothing. The factory hands back the real module (jest.mock only defers its first load here).
 */
import type * as ConnectionModule from '@temporalio/client/lib/connection';
import type * as LoggerModule from '@temporalio/worker/lib/logger';
import type * as CloseGuardModule from '../src/grpc-close-guard';
import type * as RuntimeModule from '@temporalio/worker/lib/runtime';
import type * as RuntimeOptionsModule from '@temporalio/worker/lib/runtime-options';

jest.mock('@temporalio/worker/lib/runtime', () => {
  const runtime = jest.requireActual<typeof RuntimeModule>('@temporalio/worker/lib/runtime');
  const { DefaultLogger } = jest.requireActual<typeof LoggerModule>('@temporalio/worker/lib/logger');
  const { makeTelemetryFilterString } = jest.requireActual<typeof RuntimeOptionsModule>(
    '@temporalio/worker/lib/runtime-options',
  );
  runtime.Runtime.install({
    logger: new DefaultLogger('ERROR'),
    telemetryOptions: { logging: { filter: makeTelemetryFilterString({ core: 'ERROR' }), console: {} } },
  });
  return runtime;
});

/**
 * Every grpc-js `Connection` a test file opens (its own, the API world's, and the one the SDK's test environment opens
 * to the run's dev server) gets the product's interceptors (src/grpc-close-guard.ts `clientInterceptors`) unless it
 * names its own: a file that closes a connection while one of its calls waits for a retry then sees that call answered
 * CANCELLED, not an uncaught "Channel has been shut down" from the SDK's retry timer that failed the whole file
 * (test/scenarios/cancellation-request in a CI run of 2026-12-04, test/workflows/redis-outage before).
 */
jest.mock('@temporalio/client/lib/connection', () => {
  const actual = jest.requireActual<typeof ConnectionModule>('@temporalio/client/lib/connection');
  const { clientInterceptors } = jest.requireActual<typeof CloseGuardModule>('../src/grpc-close-guard');
  const { Connection } = actual;
  const connect = Connection.connect.bind(Connection);
  Connection.connect = (options) =>
    connect({ ...options, interceptors: options?.interceptors ?? clientInterceptors() });
  return actual;
});
