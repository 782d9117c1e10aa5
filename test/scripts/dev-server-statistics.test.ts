/**
 * The dev server `npm start` keeps its state in a SQLite file, and payments stay running for their refund window, so
 * the file's visibility table only grows. SQLite without statistics plans the one-open-payment-per-order check
 * (src/client/order-guard.ts) by the status index: every running workflow read for every charge. With the pragmas
 * `npm start` passes (scripts/lib/dev-server.ts `visibilityStatisticsPragmas`) the server gathers statistics when it
 * opens the file, and the check is planned by the OrderId index. Read here the way SQLite itself decides: the state
 * file (folded out of its write-ahead log) opened with sql.js, the check's query as the server's SQLite converter
 * writes it, and SQLite's own query plan.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import initSqlJs from 'sql.js';
import { singleBoxSqlitePragmas, startDevServer, visibilityStatisticsPragmas } from '../../scripts/lib/dev-server';
import { MerchantIdAttr, OrderIdAttr, PaymentStatusAttr, ProviderAttr } from '../../src/domain/search-attributes';
import { openPaymentsOfOrderQuery } from '../../src/visibility';

let tmp: string;

beforeAll(() => {
  tmp = mkdtempSync(path.join(os.tmpdir(), 'pw-dev-server-stats-'));
});
afterAll(() => {
  rmSync(tmp, { recursive: true, force: true });
});

/** The pragmas `npm start` used before the statistics: write-ahead log, synced at checkpoints. */
const withoutStatistics = Object.fromEntries(
  Object.entries(singleBoxSqlitePragmas).filter(([k]) => !(k in visibilityStatisticsPragmas)),
);

/** Runs a dev server on `dbFilename` with `pragmas`, hands it to `use`, and stops it. */
async function withServer(
  dbFilename: string,
  pragmas: Readonly<Record<string, string>>,
  use?: (env: TestWorkflowEnvironment) => Promise<void>,
): Promise<void> {
  const env = await startDevServer({ dbFilename, sqlitePragmas: pragmas });
  try {
    await use?.(env);
  } finally {
    await env.teardown();
  }
}

/**
 * `payments` running charge workflows of two merchants, one order each, as the API starts them (their search
 * attributes in the start request; no worker needed: they stay running as payments do). Answers the column each
 * payment search attribute is stored in (`Keyword01`...), from the namespace's aliases.
 */
async function openPayments(env: TestWorkflowEnvironment, payments: number): Promise<Record<string, string>> {
  for (let i = 0; i < payments; i += 25) {
    await Promise.all(
      Array.from({ length: Math.min(25, payments - i) }, (_, j) =>
        env.client.workflow.start('chargeWorkflow', {
          workflowId: `charge:m${(i + j) % 2}:k${i + j}`,
          taskQueue: 'no-worker-here',
          typedSearchAttributes: [
            { key: PaymentStatusAttr, value: 'succeeded' },
            { key: MerchantIdAttr, value: `m${(i + j) % 2}` },
            { key: OrderIdAttr, value: `order-${i + j}` },
            { key: ProviderAttr, value: 'simulator' },
          ],
        }),
      ),
    );
  }
  const { config } = await env.client.workflowService.describeNamespace({ namespace: env.namespace ?? 'default' });
  const aliases = config?.customSearchAttributeAliases ?? {};
  return Object.fromEntries(Object.entries(aliases).map(([column, name]) => [name, column]));
}

/** The order check's query as the server's SQLite converter writes it: attribute names become their columns. */
function orderCheckSql(columns: Record<string, string>): string {
  const where = openPaymentsOfOrderQuery('m0', 'order-42', ['pending', 'unknown', 'requires_action', 'needs_review'])
    .replace(/\bWorkflowType\b/g, 'workflow_type_name')
    .replace(/ExecutionStatus != 'ContinuedAsNew'/g, 'status != 6')
    .replace(/ExecutionStatus = 'Running'/g, 'status = 1')
    .replace(/\b(MerchantId|OrderId|PaymentStatus)\b/g, (name) => columns[name] ?? name);
  return (
    `SELECT run_id FROM executions_visibility WHERE namespace_id = 'ns' AND ${where} ` +
    `ORDER BY COALESCE(close_time, '9999-12-31 23:59:59+00:00') DESC, start_time DESC, run_id LIMIT 20`
  );
}

/**
 * SQLite's plan for the order check on the state file, and whether the file holds statistics. The file is first opened
 * once more by a dev server in rollback-journal mode, which folds the write-ahead log into it (sql.js reads one file).
 */
async function planOf(dbFilename: string, sql: string): Promise<{ plan: string; statistics: boolean }> {
  await withServer(dbFilename, { journal_mode: 'delete' });
  const SQL = await initSqlJs();
  const db = new SQL.Database(readFileSync(dbFilename));
  try {
    const statistics =
      db.exec("SELECT count(*) FROM sqlite_master WHERE name = 'sqlite_stat1'")[0]?.values[0]?.[0] === 1 &&
      (db.exec("SELECT count(*) FROM sqlite_stat1 WHERE tbl = 'executions_visibility'")[0]?.values[0]?.[0] as number) >
        0;
    const plan = db
      .exec(`EXPLAIN QUERY PLAN ${sql}`)[0]
      ?.values.map((row) => String(row[3]))
      .join('; ');
    return { plan: plan ?? '', statistics };
  } finally {
    db.close();
  }
}

it('the dev server of npm start plans the one-open-payment-per-order check by the OrderId index once the file has payments', async () => {
  const file = path.join(tmp, 'with.sqlite');
  let columns: Record<string, string> = {};
  await withServer(file, singleBoxSqlitePragmas, async (env) => {
    columns = await openPayments(env, 150);
  });
  expect(columns.OrderId).toMatch(/^Keyword\d\d$/);
  // The next start opens the file with payments in it: the statistics are gathered then.
  await withServer(file, singleBoxSqlitePragmas);
  const { plan, statistics } = await planOf(file, orderCheckSql(columns));
  expect(statistics).toBe(true);
  const orderColumn = columns.OrderId ?? 'OrderId';
  expect(plan).toContain(`USING INDEX by_${orderColumn.toLowerCase().replace('keyword', 'keyword_')} `);
}, 120_000);

it('without the statistics pragmas the same check reads the status index (every running workflow)', async () => {
  const file = path.join(tmp, 'without.sqlite');
  let columns: Record<string, string> = {};
  await withServer(file, withoutStatistics, async (env) => {
    columns = await openPayments(env, 150);
  });
  await withServer(file, withoutStatistics);
  const { plan, statistics } = await planOf(file, orderCheckSql(columns));
  expect(statistics).toBe(false);
  expect(plan).not.toContain(`(namespace_id=? AND ${columns.OrderId}=?)`);
}, 120_000);
