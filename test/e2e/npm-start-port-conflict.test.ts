/**
 * `npm start` on a machine where one of its ports is taken refuses before it starts anything, and says which variable
 * moves that port and which process holds it (here: this test, which holds the worker's metrics port).
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { HOST, Stack, npmStartEnvironment } from '../helpers/npm-start';

let tmp: string;
let stack: Stack | undefined;
let holder: net.Server | undefined;

beforeAll(() => {
  tmp = mkdtempSync(path.join(os.tmpdir(), 'pw-e2e-ports-'));
});

afterAll(async () => {
  await stack?.kill();
  await new Promise((resolve) => (holder ? holder.close(resolve) : resolve(undefined)));
  rmSync(tmp, { recursive: true, force: true });
}, 30_000);

it('a taken port is refused with the variable that moves it and the process that holds it', async () => {
  const { env, ports } = await npmStartEnvironment(path.join(tmp, `${randomUUID()}.sqlite`));
  const { workerMetricsPort } = ports;
  holder = net.createServer();
  await new Promise<void>((resolve) => holder?.listen(workerMetricsPort, HOST, resolve));

  const s = new Stack(env);
  stack = s;
  await s.until('exit', () => s.exit !== undefined, 60_000, { afterExit: true });
  console.log(`[e2e] npm start with port ${workerMetricsPort} taken, after ${s.elapsedS()} s:\n${s.output.trim()}`);
  expect(s.exit?.code).not.toBe(0);
  expect(s.output).toContain(
    `Port ${workerMetricsPort} (worker metrics) is already in use on ${HOST} by pid ${process.pid} (`,
  );
  expect(s.output).toContain('set WORKER_METRICS_ADDRESS to another host:port (or off)');
  expect(s.output).not.toContain('Starting the Temporal dev server');
}, 90_000);
