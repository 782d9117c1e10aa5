/**
 * The Temporal server and the payments bench of each test, with their set-up and clean-up registered on jest's hooks:
 * one call at the top of a test file instead of the same `beforeEach`/`afterEach` lines in each.
 */
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { type Bench, type BenchOptions, startBench } from './payments';
import { connectDevServer, createTimeSkippingEnv } from './servers';

/** A file's server and benches. */
export interface BenchFixture {
  /** The current test's Temporal environment (inside tests and hooks). */
  readonly env: TestWorkflowEnvironment;
  /** Starts a bench on {@link env}; it is closed after the test. */
  bench(opts?: BenchOptions): Promise<Bench>;
}

function fixture(
  current: () => TestWorkflowEnvironment | undefined,
  opened: Bench[],
  defaults: BenchOptions = {},
): BenchFixture {
  const env = (): TestWorkflowEnvironment => {
    const e = current();
    if (e === undefined) throw new Error('no Temporal environment outside a test');
    return e;
  };
  return {
    get env() {
      return env();
    },
    async bench(opts) {
      const b = await startBench(env(), { ...defaults, ...opts });
      opened.push(b);
      return b;
    },
  };
}

async function closeAll(opened: Bench[]): Promise<void> {
  for (const b of opened.splice(0)) await b.close();
}

/**
 * A time-skipping test server per test (about 0.3 s): awaiting a result lets the server skip to the next timer of *any*
 * workflow, so one test's long timers would move the next test's clock by years.
 */
export function timeSkippingServerPerTest(): BenchFixture {
  let env: TestWorkflowEnvironment | undefined;
  const opened: Bench[] = [];
  beforeEach(async () => {
    env = await createTimeSkippingEnv();
  });
  afterEach(async () => {
    await closeAll(opened);
    await env?.teardown();
    env = undefined;
  });
  return fixture(() => env, opened);
}

/**
 * One server for the whole file (default the run's shared dev server; `start` e.g. a dev server with its own dynamic
 * config), torn down after the file; benches (with `defaults` under their options) closed after each test.
 */
export function serverPerFile(
  start: () => Promise<TestWorkflowEnvironment> = connectDevServer,
  defaults?: BenchOptions,
): BenchFixture {
  let env: TestWorkflowEnvironment | undefined;
  const opened: Bench[] = [];
  beforeAll(async () => {
    env = await start();
  });
  afterEach(async () => {
    await closeAll(opened);
  });
  afterAll(async () => {
    await closeAll(opened);
    await env?.teardown();
  });
  return fixture(() => env, opened, defaults);
}
