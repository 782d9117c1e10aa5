/**
 * stripe-mock, Stripe's official mock of its API (a Go program: github.com/stripe/stripe-mock), for the Stripe adapter's
 * tests. What this does:
 *   1. STRIPE_MOCK_PATH set: that executable, or a clear failure;
 *   2. the git-ignored cache `.temporal/stripe-mock-<version>/stripe-mock` (filled by step 3 on an earlier run);
 *   3. `go install github.com/stripe/stripe-mock@<version>` with GOBIN pointing into that cache (the Go module proxy is a
 *      package registry; `GOTOOLCHAIN=auto` lets go fetch a newer toolchain if the module asks for one), and a copy of
 *      the module's bundled fixtures (`embedded/openapi/fixtures3.json`) beside it, which the tests patch per scenario.
 * The version is pinned to the one whose OpenAPI spec matches the API version of the pinned `stripe` npm package (the
 * tests run it with `-strict-version-check`): bump both together.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, renameSync, rmSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';

const execFileAsync = promisify(execFile);

/** stripe-mock v0.203.0 serves API version 2026-08-26.dahlia, the one `stripe@22.6.2` pins. */
export const STRIPE_MOCK_VERSION = 'v0.203.0';
const MODULE = 'github.com/stripe/stripe-mock';

export interface StripeMockBinary {
  readonly path: string;
  /** The bundled fixtures (JSON) of this version. */
  readonly fixtures: string;
  /** 'env STRIPE_MOCK_PATH', 'cache' or 'go install ...'. */
  readonly source: string;
}

const projectCache = (): string => path.resolve(__dirname, '..', '..', '.temporal');

/** Finds or builds stripe-mock (see the file comment). */
export async function resolveStripeMock(
  options: { readonly env?: NodeJS.ProcessEnv; readonly cacheDir?: string } = {},
): Promise<StripeMockBinary> {
  const env = options.env ?? process.env;
  const dir = path.join(options.cacheDir ?? projectCache(), `stripe-mock-${STRIPE_MOCK_VERSION}`);
  const binary = path.join(dir, 'stripe-mock');
  const fixtures = path.join(dir, 'fixtures3.json');
  if (env.STRIPE_MOCK_PATH) {
    if (!existsSync(env.STRIPE_MOCK_PATH)) throw new Error(`STRIPE_MOCK_PATH=${env.STRIPE_MOCK_PATH} does not exist`);
    if (!existsSync(fixtures))
      throw new Error(`STRIPE_MOCK_PATH is set but ${fixtures} is missing: run npm run temporal:provision once`);
    return { path: env.STRIPE_MOCK_PATH, fixtures, source: 'env STRIPE_MOCK_PATH' };
  }
  if (existsSync(binary) && existsSync(fixtures)) return { path: binary, fixtures, source: 'cache' };
  // Build into a scratch directory and move it into place, so a failed or concurrent build never leaves half a cache.
  const scratch = `${dir}.tmp-${process.pid}`;
  rmSync(scratch, { recursive: true, force: true });
  mkdirSync(scratch, { recursive: true });
  const goEnv = { ...env, GOBIN: scratch, GOTOOLCHAIN: env.GOTOOLCHAIN ?? 'auto', GOFLAGS: '-mod=mod' };
  try {
    await execFileAsync('go', ['install', `${MODULE}@${STRIPE_MOCK_VERSION}`], { env: goEnv, timeout: 900_000 });
    const { stdout } = await execFileAsync('go', ['env', 'GOMODCACHE'], { env: goEnv });
    const source = path.join(
      stdout.trim(),
      `${MODULE}@${STRIPE_MOCK_VERSION}`,
      'embedded',
      'openapi',
      'fixtures3.json',
    );
    copyFileSync(source, path.join(scratch, 'fixtures3.json'));
  } catch (err) {
    rmSync(scratch, { recursive: true, force: true });
    throw new Error(
      `could not build stripe-mock ${STRIPE_MOCK_VERSION} with go install (is Go installed and the module proxy reachable?): ${String(err)}`,
    );
  }
  if (!existsSync(binary)) {
    mkdirSync(path.dirname(dir), { recursive: true });
    renameSync(scratch, dir);
  } else {
    rmSync(scratch, { recursive: true, force: true });
  }
  return { path: binary, fixtures, source: `go install ${MODULE}@${STRIPE_MOCK_VERSION}` };
}

/** A running stripe-mock. */
export interface RunningStripeMock {
  /** `http://127.0.0.1:<port>`. */
  readonly url: string;
  close(): Promise<void>;
}

/**
 * Starts stripe-mock on free ports of 127.0.0.1 (HTTP and HTTPS both, or it binds HTTPS on every interface at 12112),
 * with `-strict-version-check` (a request in another API version than its spec is a 400), optionally with other
 * fixtures. Resolves once it says where it listens (bounded by `timeoutMs`).
 */
export async function startStripeMock(
  binary: string,
  options: { readonly fixtures?: string; readonly timeoutMs?: number } = {},
): Promise<RunningStripeMock> {
  const args = ['-http-addr', '127.0.0.1:', '-https-addr', '127.0.0.1:', '-strict-version-check'];
  if (options.fixtures !== undefined) args.push('-fixtures', options.fixtures);
  const child: ChildProcess = spawn(binary, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`stripe-mock did not listen within ${options.timeoutMs ?? 20_000} ms:\n${output}`));
    }, options.timeoutMs ?? 20_000);
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      const m = /Listening for HTTP at address: (127\.0\.0\.1:\d+)/.exec(output);
      if (m?.[1]) {
        clearTimeout(timer);
        resolve(`http://${m[1]}`);
      }
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', onData);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`stripe-mock exited with ${String(code)}:\n${output}`));
    });
  });
  return {
    url,
    close: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      }),
  };
}
