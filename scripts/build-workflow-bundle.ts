/**
 * `npm run build:workflow-bundle`: the prebuilt workflow bundle the production worker loads (WORKFLOW_BUNDLE_PATH),
 * so a worker start does not run webpack and every worker runs byte-identical workflow code.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { bundleWorkflowCode } from '@temporalio/worker';
import { failureConverterPath } from '../src/codec';

async function main() {
  const out = path.resolve(process.argv[2] ?? path.join(__dirname, '..', 'dist', 'workflow-bundle.js'));
  // The workers' failure converter is part of the bundle: failure texts are encoded (encrypted by the codec).
  const { code } = await bundleWorkflowCode({
    workflowsPath: require.resolve('../src/workflows'),
    failureConverterPath,
  });
  mkdirSync(path.dirname(out), { recursive: true });
  writeFileSync(out, code);
  console.log(`workflow bundle: ${out} (${(code.length / 1024).toFixed(0)} KiB)`);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
