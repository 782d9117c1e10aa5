/**
 * The payment workflows' bundle for tests. Jest gives each test file its own module registry, so a bundle cached in a
 * module is built again in every file (webpack, ~3 s of CPU each, over 60 files). The global setup builds it once
 * per run (test/global-setup.ts) and hands its path over in {@link WORKFLOW_BUNDLE_ENV}; a file run on its own
 * without the global setup builds its own.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { bundleWorkflowCode, type WorkflowBundleWithSourceMap } from '@temporalio/worker';
import { failureConverterPath } from '../../src/codec';

/** The environment variable naming the file of the run's bundle. */
export const WORKFLOW_BUNDLE_ENV = 'PW_TEST_WORKFLOW_BUNDLE';

/**
 * Bundles the workflows as the worker does: failure texts encoded (and so encrypted where a codec is configured); with
 * a test's own workflow interceptor modules where it names them.
 */
export function buildWorkflowBundle(workflowInterceptorModules: string[] = []): Promise<WorkflowBundleWithSourceMap> {
  return bundleWorkflowCode({
    workflowsPath: require.resolve('../../src/workflows'),
    failureConverterPath,
    workflowInterceptorModules,
    logger: { log() {}, trace() {}, debug() {}, info() {}, warn() {}, error: (m: string) => console.error(m) },
  });
}

let bundle: Promise<WorkflowBundleWithSourceMap> | undefined;

/** The workflow bundle: the run's (built once by the global setup), else built once per test file. */
export function workflowBundle(): Promise<WorkflowBundleWithSourceMap> {
  const shared = process.env[WORKFLOW_BUNDLE_ENV];
  bundle ??= shared ? Promise.resolve({ code: readFileSync(shared, 'utf8'), sourceMap: '' }) : buildWorkflowBundle();
  return bundle;
}

let bundleFile: Promise<string> | undefined;

/**
 * A file holding the workflow bundle, for the worker processes tests spawn (`workflowBundle: { codePath }`): the run's,
 * else one written once for this test file and removed when its process exits.
 */
export function workflowBundlePath(): Promise<string> {
  const shared = process.env[WORKFLOW_BUNDLE_ENV];
  if (shared) return Promise.resolve(shared);
  bundleFile ??= workflowBundle().then((b) => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'pw-test-bundle-'));
    process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
    const file = path.join(dir, 'workflow-bundle.js');
    writeFileSync(file, b.code);
    return file;
  });
  return bundleFile;
}
