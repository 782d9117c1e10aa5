/**
 * `npm run build:workflow-bundle [out] [workflows entry]`: the prebuilt workflow bundle the production worker loads
 * (WORKFLOW_BUNDLE_PATH), so a worker start does not run webpack and every worker runs byte-identical workflow code.
 * The package's build (`npm run build:package`) bundles the package's own workflows entry, the way a consumer would.
 *
 * A bundle is reused when nothing it is built from changed: every file of the entry's build root (`dist/` or `src/`),
 * the lockfile (the SDK and webpack versions) and this script, hashed into `<out>.inputs`.
 */
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';

const projectRoot = path.join(__dirname, '..');

/** Every file under `dir` but `skip`, sorted, so the hash does not depend on the directory's order. */
function filesUnder(dir: string, skip: ReadonlySet<string>): string[] {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile())
    .map((e) => path.join(e.parentPath, e.name))
    .filter((f) => !skip.has(f))
    .sort();
}

/** The top folder of the project `entry` lives in (`src/`, or `dist/` for the package's build). */
const buildRootOf = (entry: string): string =>
  path.join(projectRoot, path.relative(projectRoot, entry).split(path.sep)[0] ?? '');

/** SHA-256 over the names and contents of what the bundle of `entry` is built from. */
function inputsHash(entry: string, out: string): string {
  const buildRoot = buildRootOf(entry);
  const files = [
    ...filesUnder(buildRoot, new Set([out, `${out}.inputs`])),
    path.join(projectRoot, 'package-lock.json'),
    __filename,
  ];
  const hash = createHash('sha256');
  for (const file of files) hash.update(`${path.relative(projectRoot, file)}\0`).update(readFileSync(file));
  return hash.digest('hex');
}

async function main() {
  const out = path.resolve(process.argv[2] ?? path.join(projectRoot, 'dist', 'workflow-bundle.js'));
  const entry = process.argv[3] === undefined ? require.resolve('../src/workflows') : path.resolve(process.argv[3]);
  const from = path.relative(process.cwd(), entry);
  const inputs = inputsHash(entry, out);
  if (existsSync(out) && existsSync(`${out}.inputs`) && readFileSync(`${out}.inputs`, 'utf8') === inputs) {
    console.log(`workflow bundle: ${out} from ${from} (unchanged inputs: reused)`);
    return;
  }
  // Loaded only to build: the SDK's worker package takes a few seconds to load on a busy machine.
  const { bundleWorkflowCode } = await import('@temporalio/worker');
  // The workers' failure converter is part of the bundle: failure texts are encoded (encrypted by the codec). It comes
  // from the entry's own build root (src/ or the package's dist/), like the workflows.
  const failureConverterPath = require.resolve(path.join(buildRootOf(entry), 'codec', 'failure-converter'));
  const { code } = await bundleWorkflowCode({ workflowsPath: entry, failureConverterPath });
  mkdirSync(path.dirname(out), { recursive: true });
  writeFileSync(out, code);
  writeFileSync(`${out}.inputs`, inputs);
  console.log(`workflow bundle: ${out} from ${from} (${(code.length / 1024).toFixed(0)} KiB)`);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
