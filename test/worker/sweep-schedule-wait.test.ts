/**
 * A worker ensures its reconcile sweep schedule at start. While Temporal's database restarts, the frontend is
 * reachable but answers `NamespaceNotFoundError` (the cluster soak's PostgreSQL restart: every worker starting then
 * exited 1 there, each exit a crash for its supervisor). The worker waits for the namespace as it waits for the
 * server (TEMPORAL_CONNECT_WAIT_MS). Here the namespace really is missing on the dev server, then registered.
 */
import { randomUUID } from 'node:crypto';
import { Client } from '@temporalio/client';
import { NamespaceNotFoundError, msToTs } from '@temporalio/common';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { ZodError } from 'zod';
import type { SweepScheduleOptions } from '../../src/schedules';
import { ensureSweepScheduleWithin } from '../../src/stack';
import { connectDevServer } from '../helpers/servers';
import { eventually } from '../helpers/eventually';

let env: TestWorkflowEnvironment;
beforeAll(async () => {
  env = await connectDevServer();
});
afterAll(async () => {
  await env?.teardown();
});

const options: SweepScheduleOptions = {
  taskQueue: `sweep-wait-${randomUUID()}`,
  intervalMs: 3_600_000,
  lookbackMs: 0,
  unknownThresholdMs: 3_600_000,
  providers: ['simulator'],
};

function recorder() {
  const lines: { level: string; message: string; fields: Record<string, unknown> }[] = [];
  return {
    lines,
    logger: {
      warn: (fields: Record<string, unknown>, message: string) => lines.push({ level: 'warn', message, fields }),
      info: (fields: Record<string, unknown>, message: string) => lines.push({ level: 'info', message, fields }),
    },
  };
}

it('waits while the namespace is not found and creates the schedule once it is there', async () => {
  const namespace = `pw-wait-${randomUUID().slice(0, 8)}`;
  const client = new Client({ connection: env.client.connection, namespace });
  const { lines, logger } = recorder();
  const ensured = ensureSweepScheduleWithin(client, options, { waitMs: 60_000, address: env.address, logger });
  // The first attempts really meet a missing namespace.
  await eventually('a refusal logged', () => lines.some((l) => l.level === 'warn'), 20_000, 50);
  expect(String(lines[0]?.fields.err)).toMatch(/[Nn]amespace/);
  await env.client.connection.workflowService.registerNamespace({
    namespace,
    workflowExecutionRetentionPeriod: msToTs(86_400_000),
  });
  await expect(ensured).resolves.toMatchObject({ outcome: 'created' });
  expect(lines.at(-1)).toMatchObject({ level: 'info', message: 'the reconcile sweep schedule (Temporal) reachable' });
  const described = await client.schedule.getHandle(`reconcile-sweep:${options.taskQueue}`).describe();
  expect(described.action).toMatchObject({ workflowType: 'reconcileSweepWorkflow', taskQueue: options.taskQueue });
}, 60_000);

it('gives up with the last error when the namespace does not come within the wait', async () => {
  const client = new Client({ connection: env.client.connection, namespace: `pw-never-${randomUUID().slice(0, 8)}` });
  const { lines, logger } = recorder();
  const started = Date.now();
  await expect(
    ensureSweepScheduleWithin(client, options, { waitMs: 1_500, address: env.address, logger }),
  ).rejects.toBeInstanceOf(NamespaceNotFoundError);
  expect(Date.now() - started).toBeGreaterThanOrEqual(700);
  expect(lines.filter((l) => l.level === 'warn').length).toBeGreaterThanOrEqual(1);
});

it('throws options that make no valid sweep input at once, without waiting', async () => {
  const { lines, logger } = recorder();
  await expect(
    ensureSweepScheduleWithin(
      env.client,
      { ...options, providers: [] },
      { waitMs: 60_000, address: env.address, logger },
    ),
  ).rejects.toBeInstanceOf(ZodError);
  expect(lines).toEqual([]);
});
