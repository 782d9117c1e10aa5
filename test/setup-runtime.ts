import { DefaultLogger, Runtime } from '@temporalio/worker';

// Worker lifecycle INFO lines would bury test output; warnings and errors still show.
Runtime.install({ logger: new DefaultLogger('WARN') });
