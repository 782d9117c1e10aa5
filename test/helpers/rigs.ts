/**
 * The Temporal server and the payments rig of each test, with their set-up and clean-up registered on jest's hooks:
 * one call at the top of a test file instead of the same `beforeEach`/`afterEach` lines in each.
 */
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { type Rig, type RigOptions, startRig } from './payments';
import { connectDevServer, createTimeSkippingEnv } from './servers';

/** A file's server and rigs. */
export interface RigFixture {
  /** The current test's Temporal environment (inside tests and hooks). */
  readonly env: TestWorkflowEnvironment;
  /** Starts a rig on {@link env}; it is closed after the test. */
  rig(opts?: RigOptions): Promise<Rig>;
}

function fixture(
  current: () => TestWorkflowEnvironment | undefined,
  opened: Rig[],
  defaults: RigOptions = {},
): RigFixture {
  const env = (): TestWorkflowEnvironment => {
    const e = current();
    if (e === undefined) throw new Error('no Temporal environment outside a test');
    return e;
  };
  return {
    get env() {
      return env();
    },
    async rig(opts) {
      const b = await startRig(env(), { ...defaults, ...opts });
      opened.push(b);
      return b;
    },
  };
}

async function closeAll(opened: Rig[]): Promise<void> {
  for (const b of opened.splice(0)) await b.close();
}

/**
 * A time-skipping test server per test (about 0.3 s): awaiting a result lets the server skip to the next timer of *any*
 * workflow, so one test's long timers would move the next test's clock by years.
 */
export function timeSkippingServerPerTest(): RigFixture {
  let env: TestWorkflowEnvironment | undefined;
  const opened: Rig[] = [];
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
 * config), torn down after the file; rigs (with `defaults` under their options) closed after each test.
 */
export function serverPerFile(
  start: () => Promise<TestWorkflowEnvironment> = connectDevServer,
  defaults?: RigOptions,
): RigFixture {
  let env: TestWorkflowEnvironment | undefined;
  const opened: Rig[] = [];
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
