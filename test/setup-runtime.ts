import { DefaultLogger, Runtime, makeTelemetryFilterString } from '@temporalio/worker';

// Worker lifecycle INFO lines and the test server's capability warnings would bury test output; errors still show.
Runtime.install({
  logger: new DefaultLogger('ERROR'),
  telemetryOptions: { logging: { filter: makeTelemetryFilterString({ core: 'ERROR' }), console: {} } },
});
