/**
 * `npm run fuzz -- --runs N [--seed S] [--path P --replay-path R] [--commands K] [--heavy W] [--exclude a,b] [--only a,b]
 * [--time-limit MS] [--continue-as-new EVENTS] [--verbose]`: the money model (test/model/money-model.test.ts) with more or longer sequences than `npm test` runs,
 * or the replay of one counterexample (seed, path and replay path as a failure prints them). It runs the same jest
 * file with FUZZ_* variables, so the run has its own dev server like any test run.
 */
import { spawnSync } from 'node:child_process';
import { parseArgs } from 'node:util';
import { TEMPORAL_CLI, TEMPORAL_TEST_SERVER, resolveBinary } from './lib/temporal-binaries';

const usage =
  'usage: npm run fuzz -- [--runs N] [--seed S] [--path P] [--replay-path R] [--commands K] [--heavy W] ' +
  '[--exclude name,fault:kind] [--only name,fault:kind] [--time-limit MS] [--continue-as-new EVENTS] [--verbose]';

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      runs: { type: 'string' },
      seed: { type: 'string' },
      path: { type: 'string' },
      'replay-path': { type: 'string' },
      commands: { type: 'string' },
      heavy: { type: 'string' },
      exclude: { type: 'string' },
      only: { type: 'string' },
      'time-limit': { type: 'string' },
      'continue-as-new': { type: 'string' },
      verbose: { type: 'boolean' },
      help: { type: 'boolean' },
    },
  });
  if (values.help) {
    console.log(usage);
    return 0;
  }
  for (const name of ['runs', 'seed', 'commands', 'heavy', 'time-limit', 'continue-as-new'] as const) {
    const v = values[name];
    if (v !== undefined && !/^-?\d+$/.test(v)) {
      console.error(`--${name} must be an integer\n${usage}`);
      return 2;
    }
  }
  // As `npm test` does: find (or provision) the Temporal binaries before jest starts its dev server.
  for (const spec of [TEMPORAL_CLI, TEMPORAL_TEST_SERVER]) await resolveBinary(spec);

  const env: NodeJS.ProcessEnv = { ...process.env, FUZZ_RUNS: values.runs ?? (values.path ? '1' : '50') };
  const set = (name: string, value: string | undefined) => {
    if (value !== undefined) env[name] = value;
  };
  set('FUZZ_SEED', values.seed);
  set('FUZZ_PATH', values.path);
  set('FUZZ_REPLAY_PATH', values['replay-path']);
  set('FUZZ_MAX_COMMANDS', values.commands);
  // The heavy adversaries (deploys, crashes, outages, long Retry-After) 20 times as often as in `npm test`.
  env.FUZZ_HEAVY = values.heavy ?? '20';
  set('FUZZ_EXCLUDE', values.exclude);
  set('FUZZ_ONLY', values.only);
  set('FUZZ_TIME_LIMIT_MS', values['time-limit']);
  // A model dev server of its own that suggests continue-as-new past this many events (every long payment continues).
  set('FUZZ_CONTINUE_AS_NEW', values['continue-as-new']);
  if (values.verbose) env.FUZZ_VERBOSE = '1';
  const jest = require.resolve('jest/bin/jest');
  const result = spawnSync(process.execPath, [jest, '--runTestsByPath', 'test/model/money-model.test.ts'], {
    stdio: 'inherit',
    env,
  });
  return result.status ?? 1;
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    console.error(err instanceof Error ? err.message : err);
    process.exit(1);
  },
);
