/**
 * The Temporal CLI dev server the way this project runs it everywhere (tests, `npm start`, the benchmark): the CLI
 * resolved through the provisioning chain, bound to loopback, with the payment search attributes registered, the
 * dynamic config a single-box deployment wants and, for a state file, SQLite pragmas that do not sync every commit.
 */
import { TestWorkflowEnvironment } from '@temporalio/testing';
import type { DevServerConfig } from '@temporalio/testing/lib/ephemeral-server';
import { paymentSearchAttributes } from '../../src/domain/search-attributes';
import { type ResolveOptions, TEMPORAL_CLI, resolveBinary, startWith } from './temporal-binaries';

/** A dynamic config value as `--dynamic-config-value KEY=JSON` takes it. */
export type DynamicConfigValue = number | boolean | string;

/**
 * The dev server is a whole cluster with ONE history shard, and the history service reads each shard's task queues
 * through a token bucket sized for a cluster of hundreds of shards: 20 reads per second per shard by default.
 * Every payment needs several reads of the transfer queue (its first workflow task, the activity, the next workflow
 * task go to matching through it), so past a few payments a second every hand-off waits for a token (~30-40 ms
 * each: 150 ms instead of 45 for one payment). The timer queue (timers, activity retries and their backoff, timeouts)
 * and the visibility queue (search attributes, which the one-open-payment-per-order check reads) have the same
 * bucket. On one box the shard is the host, so the per-shard limits are raised to what one host can serve.
 * Matching stays as it is: the same bench run with one task queue partition instead of the default four was not
 * faster (see bench/README.md).
 */
export const singleBoxDynamicConfig: Readonly<Record<string, DynamicConfigValue>> = {
  'history.transferProcessorMaxPollRPS': 1000,
  'history.timerProcessorMaxPollRPS': 1000,
  'history.visibilityProcessorMaxPollRPS': 1000,
};

/**
 * Statistics for SQLite's query planner, gathered when the dev server opens its state file (SQLite's own advice for
 * long-lived connections: `PRAGMA optimize=0x10002` at open; the server applies pragmas in name order, so
 * `analysis_limit` bounds that ANALYZE first, to about a thousand rows per index however large the file grew). Without
 * statistics SQLite cannot tell a selective index from the others, and for the one-open-payment-per-order check
 * (`OrderId = .. AND ExecutionStatus = 'Running' AND ..`) it chose the status index: it read every running workflow, and
 * payments stay running for their refund window, so each charge's check grew with every payment ever made (22-27 ms
 * p50 with 2,900 open payments under `npm start`, most of a wallet-only payment's answer). With them, the OrderId index
 * (about one row per order) is chosen. A file first created empty gets them at its next start.
 */
export const visibilityStatisticsPragmas: Readonly<Record<string, string>> = {
  analysis_limit: '1000',
  optimize: '0x10002',
};

/**
 * SQLite pragmas for a dev server that keeps its state in a file (`npm start`): write-ahead log, synced at checkpoints
 * instead of at every commit. The CLI's default (a rollback journal, synced at every commit) made every workflow task
 * and activity hand-off wait for the disk: one payment at a time took 107 ms p50 instead of 67 on the same (busy)
 * machine, where the in-memory server took 67 too. A dev server that crashes loses nothing committed; an operating
 * system crash may lose the last commits, which is fine for local development state. Ignored without a file.
 */
export const singleBoxSqlitePragmas: Readonly<Record<string, string>> = {
  journal_mode: 'wal',
  synchronous: 'normal',
  ...visibilityStatisticsPragmas,
};

/** Server options beyond the defaults: ports, UI, SQLite file, extra CLI args, dynamic config. */
export type DevServerOptions = Omit<DevServerConfig, 'type' | 'executable' | 'searchAttributes'> & {
  /**
   * Dynamic config values; default {@link singleBoxDynamicConfig}. Pass `{}` for the stock dev server, or spread the
   * default and add or override keys. (Keys given here must not be repeated in `extraArgs`.)
   */
  readonly dynamicConfig?: Readonly<Record<string, DynamicConfigValue>>;
  /** With `dbFilename`: SQLite pragmas (`journal_mode`, `synchronous`); default {@link singleBoxSqlitePragmas}. */
  readonly sqlitePragmas?: Readonly<Record<string, string>>;
};

/** `--dynamic-config-value KEY=JSON` pairs for `temporal server start-dev`. */
export function dynamicConfigArgs(values: Readonly<Record<string, DynamicConfigValue>>): string[] {
  return Object.entries(values).flatMap(([key, value]) => [
    '--dynamic-config-value',
    `${key}=${JSON.stringify(value)}`,
  ]);
}

/** Starts a dev server; tear it down with `env.teardown()`. */
export async function startDevServer(
  options: DevServerOptions = {},
  resolve: ResolveOptions & { readonly onResolved?: (source: string) => void } = {},
): Promise<TestWorkflowEnvironment> {
  const {
    dynamicConfig = singleBoxDynamicConfig,
    sqlitePragmas = singleBoxSqlitePragmas,
    extraArgs = [],
    ...server
  } = options;
  const pragmaArgs =
    server.dbFilename === undefined
      ? []
      : Object.entries(sqlitePragmas).flatMap(([k, v]) => ['--sqlite-pragma', `${k}=${v}`]);
  const cli = await resolveBinary(TEMPORAL_CLI, resolve);
  resolve.onResolved?.(cli.source);
  return startWith(cli, TEMPORAL_CLI, (executable) =>
    TestWorkflowEnvironment.createLocal({
      server: {
        ip: '127.0.0.1',
        log: { format: 'pretty', level: 'error' },
        ...server,
        extraArgs: [...dynamicConfigArgs(dynamicConfig), ...pragmaArgs, ...extraArgs],
        executable,
        searchAttributes: [...paymentSearchAttributes],
      },
    }),
  );
}

/** A search attribute type as the CLI spells it: `KEYWORD` -> `Keyword`, `KEYWORD_LIST` -> `KeywordList`. */
export const cliAttributeType = (type: string): string =>
  type
    .toLowerCase()
    .split('_')
    .map((w) => w.charAt(0).toUpperCase() + w.slice(1))
    .join('');

/** A dev server run as a process of its own (`npm start` supervises it), not through the SDK. */
export interface DevServerProcessOptions {
  readonly ip: string;
  readonly port: number;
  /** The web UI's port; absent: headless. */
  readonly uiPort?: number;
  readonly dbFilename?: string;
  readonly logLevel?: 'debug' | 'info' | 'warn' | 'error';
  readonly dynamicConfig?: Readonly<Record<string, DynamicConfigValue>>;
  readonly sqlitePragmas?: Readonly<Record<string, string>>;
  readonly extraArgs?: readonly string[];
}

/**
 * The arguments of `temporal server start-dev` for {@link DevServerProcessOptions}: what the SDK's ephemeral server
 * passes (namespace `default`, update APIs on, no version check) plus what {@link startDevServer} adds (the payment
 * search attributes, {@link singleBoxDynamicConfig}, {@link singleBoxSqlitePragmas} with a state file).
 */
export function devServerArgs(o: DevServerProcessOptions): string[] {
  const dynamicConfig = {
    'frontend.enableServerVersionCheck': false,
    'frontend.enableUpdateWorkflowExecution': true,
    'frontend.enableUpdateWorkflowExecutionAsyncAccepted': true,
    ...(o.dynamicConfig ?? singleBoxDynamicConfig),
  };
  const pragmas = o.dbFilename === undefined ? {} : (o.sqlitePragmas ?? singleBoxSqlitePragmas);
  return [
    'server',
    'start-dev',
    '--ip',
    o.ip,
    '--port',
    String(o.port),
    '--namespace',
    'default',
    '--log-format',
    'pretty',
    '--log-level',
    o.logLevel ?? 'warn',
    ...(o.uiPort === undefined ? ['--headless'] : ['--ui-port', String(o.uiPort)]),
    ...(o.dbFilename === undefined ? [] : ['--db-filename', o.dbFilename]),
    ...paymentSearchAttributes.flatMap((a) => ['--search-attribute', `${a.name}=${cliAttributeType(a.type)}`]),
    ...dynamicConfigArgs(dynamicConfig),
    ...Object.entries(pragmas).flatMap(([k, v]) => ['--sqlite-pragma', `${k}=${v}`]),
    ...(o.extraArgs ?? []),
  ];
}
