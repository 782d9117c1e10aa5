/**
 * The worker process checks its slots against the retry budgets before it connects to anything (src/worker.ts,
 * `checkWorkerCapacity` in src/stack.ts): in production a budget that cannot wait one turn of the slots refuses the
 * start with the numbers; in development the same finding is a warning and the worker goes on.
 */
import { spawn } from 'node:child_process';
import path from 'node:path';
import { refusedPort } from '../helpers/net';

const root = path.resolve(__dirname, '..', '..');

/**
 * Runs src/worker.ts with `env` until it exits, its output so far satisfies `until`, or `timeoutMs`; answers its exit
 * code and its output.
 */
function runWorker(
  env: NodeJS.ProcessEnv,
  timeoutMs: number,
  until: (output: string) => boolean = () => false,
): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--import', 'tsx', path.join(root, 'src', 'worker.ts')], {
      cwd: root,
      env: { PATH: process.env.PATH, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    const collect = (d: Buffer) => {
      output += d.toString();
      if (until(output)) child.kill('SIGKILL');
    };
    child.stdout.on('data', collect);
    child.stderr.on('data', collect);
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.once('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, output });
    });
  });
}

/** `npm run demo`'s quick settings, whose create budget cannot wait for a slot behind 30 s attempts. */
const tightBudget = {
  RETRY_CREATE_BUDGET_MS: '16000',
  RETRY_CREATE_MAX_ATTEMPTS: '2',
  PROVIDER_TOTAL_TIMEOUT_MS: '5000',
};

it('refuses to start in production, naming the numbers, before it connects to anything', async () => {
  // Nothing listens there: a worker that got past the check would fail (or hang) connecting instead.
  const port = await refusedPort();
  const { code, output } = await runWorker(
    {
      ...tightBudget,
      NODE_ENV: 'production',
      TEMPORAL_ADDRESS: `127.0.0.1:${port}`,
      PROVIDER_API_KEY: 'sk_test_capacity_check',
      API_TOKENS: 'm1:token-of-merchant-one',
      WEBHOOK_SECRET: 'whsec_capacity_check',
      PAYLOAD_KEYS: `k1:${Buffer.alloc(32, 7).toString('base64')}`,
      WORKER_METRICS_ADDRESS: 'off',
      SDK_METRICS_ADDRESS: 'off',
    },
    60_000,
  );
  console.log(
    `[capacity-check] production worker exited ${code}:\n${output.trim().split('\n').slice(0, 2).join('\n')}`,
  );
  expect(code).toBe(1);
  expect(output).toContain('worker slots do not fit the retry budgets');
  expect(output).toContain("create's budget (16 s, RETRY_CREATE_BUDGET_MS) leaves 1 s to wait for a slot");
  expect(output).not.toMatch(/connect|ECONNREFUSED|TransportError/i);
}, 90_000);

it('warns in development and goes on to connect', async () => {
  const port = await refusedPort();
  const connecting = (output: string) => output.includes('Temporal server not reachable');
  const { output } = await runWorker(
    {
      ...tightBudget,
      TEMPORAL_ADDRESS: `127.0.0.1:${port}`,
      LOG_LEVEL: 'info',
      WORKER_METRICS_ADDRESS: 'off',
      SDK_METRICS_ADDRESS: 'off',
    },
    20_000,
    connecting,
  );
  const lines = output.split('\n').filter((l) => l.startsWith('{'));
  expect(lines.some((l) => connecting(l) && l.includes(`"address":"127.0.0.1:${port}"`))).toBe(true);
  const warn = lines.find((l) => l.includes('"level":40') && l.includes("create's budget (16 s"));
  expect(warn).toContain('(In production this worker refuses to start.)');
  expect(lines.some((l) => l.includes('"level":30') && l.includes('provider simulator: 50 slots'))).toBe(true);
  expect(output).not.toContain('worker slots do not fit the retry budgets');
}, 60_000);
