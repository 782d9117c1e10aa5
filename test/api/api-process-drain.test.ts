/**
 * The API process (src/api-main.ts) drains on SIGTERM, and the drain has an end: a request that never completes (a
 * client stalled in the middle of its body) would otherwise hold `close()` until Node's request timeout (5 minutes).
 * Under `npm start` the supervisor SIGKILLs a child that outlives its stop timeout, but a child whose supervisor died
 * gets only its parent-death SIGTERM: nobody would stop it (seen once: an API still running 20 s after its
 * supervisor's SIGKILL, test/e2e/npm-start-supervisor-death).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import net from 'node:net';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { HOST, PROJECT_ROOT, freePorts } from '../helpers/npm-start';
import { eventually } from '../helpers/eventually';
import { DEV_SERVER_ADDRESS_ENV } from '../helpers/servers';

let api: ChildProcess | undefined;
let stalled: net.Socket | undefined;
afterEach(() => {
  stalled?.destroy();
  if (api && api.exitCode === null && api.signalCode === null) api.kill('SIGKILL');
});

it('exits within its drain limit on SIGTERM although a request never completes, saying so', async () => {
  const [port] = (await freePorts(1)) as [number];
  let output = '';
  api = spawn(process.execPath, ['--import', 'tsx', path.join(PROJECT_ROOT, 'src/api-main.ts')], {
    cwd: PROJECT_ROOT,
    env: {
      ...process.env,
      TEMPORAL_ADDRESS: process.env[DEV_SERVER_ADDRESS_ENV] ?? '',
      TASK_QUEUE: `drain-${randomUUID()}`,
      HOST,
      PORT: String(port),
      SUBMIT_WAIT_MS: '1000',
      LOG_LEVEL: 'info',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  api.stdout?.on('data', (b: Buffer) => (output += b.toString()));
  api.stderr?.on('data', (b: Buffer) => (output += b.toString()));
  const exited = new Promise<{ code: number | null; atMs: number }>((resolve) =>
    api?.once('exit', (code) => resolve({ code, atMs: Date.now() })),
  );
  await eventually(
    'the API to listen',
    async () => (await fetch(`http://${HOST}:${port}/healthz`).catch(() => undefined))?.ok,
    60_000,
    200,
  );

  // A request whose body never finishes: headers promise 1,000 bytes, 10 come.
  stalled = net.connect(port, HOST);
  await new Promise<void>((resolve) => stalled?.once('connect', () => resolve()));
  stalled.write(
    `POST /v1/payments HTTP/1.1\r\nHost: ${HOST}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"amount":`,
  );
  await new Promise((r) => setTimeout(r, 300));

  const termAt = Date.now();
  api.kill('SIGTERM');
  // Without a limit it would wait for Node's request timeout (5 minutes): give up on it after a minute.
  const ended = await Promise.race([exited, new Promise<undefined>((r) => setTimeout(() => r(undefined), 60_000))]);
  expect({ exitedWithinAMinute: ended !== undefined, output: ended ? '' : output.slice(-2_000) }).toEqual({
    exitedWithinAMinute: true,
    output: '',
  });
  const { code, atMs } = ended as { code: number | null; atMs: number };
  const seconds = (atMs - termAt) / 1000;
  console.log(`[drain] API exited ${seconds.toFixed(1)} s after SIGTERM, code ${code}`);
  expect(output).toContain('api draining');
  expect(output).toContain('the drain did not finish within');
  expect(code).toBe(1);
  // The limit is 10 s (SUBMIT_WAIT_MS + 5 s, at least 10 s): well before the 5 minutes the stalled request could hold.
  expect(seconds).toBeGreaterThanOrEqual(9);
}, 120_000);
