/**
 * A model-based money test (issue 8): random, seeded, shrinking sequences of charges, captures, refunds, repeats,
 * reused keys, provider faults, duplicated/reordered webhooks and operator resolves, across two merchants, against the
 * real stack (the run's dev server, the simulator over HTTP, the API, two worker processes); and issue 19's
 * adversaries: rolling deploys into other provider settings, a worker killed during a local first create attempt,
 * provider outages and Retry-After longer than every budget; and issue 23's wallets (credits, split payments, refunds,
 * repeats) in a PostgreSQL database of their own. After each sequence settles, every answer and every view is held
 * against the provider's ledger (bench/money-invariant.ts), every wallet against its entries and that ledger
 * (wallet-invariants.ts), and every answered key against the key-record table (the payments announce their events and
 * hand their key answers over, one activity a task, as under `npm start`). `npm run fuzz -- --runs N` runs more of the same.
 */
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import fc from 'fast-check';
import { startDevServer } from '../../scripts/lib/dev-server';
import { connectDevServer, testDynamicConfig } from '../helpers/servers';
import { checkMoneyProperty, replayCommand, settingsFromEnv } from './property';
import { type World, startWorld } from './world';

const settings = settingsFromEnv();
// Every run may wait for a reconcile and then for quiescence; a failure is shrunk by re-running sequences.
const budgetMs = (settings.timeLimitMs ?? settings.runs * 90_000) + 120_000;

let env: TestWorkflowEnvironment;
let world: World;

beforeAll(async () => {
  const after = settings.continueAsNewAfter;
  env =
    after === undefined
      ? await connectDevServer()
      : await startDevServer({
          dynamicConfig: { ...testDynamicConfig, 'limit.historyCount.suggestContinueAsNew': after },
        });
  // Two worker processes, a redis-server and a PostgreSQL database besides the test world.
  world = await startWorld(env);
}, 180_000);

afterAll(async () => {
  await world?.close();
  await env?.teardown();
});

it(
  'keeps every money answer true to the provider across random sequences of two merchants',
  async () => {
    const started = Date.now();
    const { details, executed, skippedAfterLimit } = await checkMoneyProperty(world, settings);
    const seconds = ((Date.now() - started) / 1000).toFixed(1);
    // On its own server every run that continued as new is the model's: say how many did.
    const continued =
      settings.continueAsNewAfter === undefined
        ? ''
        : `; ${(await env.client.workflow.count(`ExecutionStatus = 'ContinuedAsNew'`)).count} run(s) continued as ` +
          `new past ${settings.continueAsNewAfter} events`;
    console.log(
      `money model: ${executed} sequence(s) run in ${seconds} s (seed ${details.seed}, at most ` +
        `${settings.maxCommands} commands each)` +
        (skippedAfterLimit > 0 ? `; ${skippedAfterLimit} more passed unrun after the time limit` : '') +
        continued,
    );
    if (!details.failed) return;
    const report = fc.defaultReportMessage(details) ?? '';
    const error = details.errorInstance;
    const replayPath = /replayPath="([^"]*)"/.exec(report)?.[1];
    throw new Error(
      `money model failed after ${details.numRuns} run(s) and ${details.numShrinks} shrink(s)\n` +
        `seed ${details.seed}, path ${details.counterexamplePath ?? '?'}\n` +
        `replay: ${replayCommand(settings, details.seed, details.counterexamplePath ?? '', replayPath)}\n\n` +
        `${report}\n\n${error instanceof Error ? error.message : String(error)}`,
    );
  },
  budgetMs,
);
