/** The reconcile sweep's inputs, runs and what it compares, for the sweep's tests. */
import { randomUUID } from 'node:crypto';
import type { Client } from '@temporalio/client';
import type { PaymentView } from '../../src/domain/payment';
import { SweepInput, type SweepResult } from '../../src/domain/sweep';
import type { SweepScheduleOptions } from '../../src/schedules';
import type { reconcileSweepWorkflow } from '../../src/workflows/sweep';

/** An hour's interval and unknown threshold, no lookback, over the simulator. */
const hourly = {
  providers: ['simulator'],
  intervalMs: 3_600_000,
  lookbackMs: 0,
  unknownThresholdMs: 3_600_000,
};

/** A one-off sweep run's input over an explicit `window` (hourly, over the simulator, unless `over` says otherwise). */
export const sweepInputOver = (window: { fromMs: number; toMs: number }, over: Partial<SweepInput> = {}): SweepInput =>
  SweepInput.parse({ ...hourly, window, ...over });

/** Executes one sweep run directly (no schedule) on `taskQueue` over `providers`, from a minute before `now` to 2 s after. */
export const runSweepAt = (
  client: Client,
  opts: { taskQueue: string; providers: string[]; now: number; idPrefix: string },
): Promise<SweepResult> =>
  client.workflow.execute<typeof reconcileSweepWorkflow>('reconcileSweepWorkflow', {
    workflowId: `${opts.idPrefix}:${randomUUID()}`,
    taskQueue: opts.taskQueue,
    args: [sweepInputOver({ fromMs: opts.now - 60_000, toMs: opts.now + 2_000 }, { providers: opts.providers })],
  });

/** Options of an hourly sweep schedule over the simulator for `taskQueue`. */
export const hourlySchedule = (taskQueue: string): SweepScheduleOptions => ({ taskQueue, ...hourly });

/** A payment of ours as the sweep reads it: 1000 EUR succeeded at the simulator as `pay_1`, created 2030-01-01. */
export const ourPayment = (over: Partial<PaymentView> = {}): PaymentView => ({
  key: 'k',
  merchantId: 'm',
  orderId: 'o',
  status: 'succeeded',
  amount: { value: 1_000, currency: 'EUR' },
  amountAuthorized: 1_000,
  amountCaptured: 1_000,
  amountRefunded: 0,
  provider: 'simulator',
  providerPaymentId: 'pay_1',
  attempts: 1,
  createdAt: '2030-01-01T00:00:00.000Z',
  updatedAt: '2030-01-01T00:00:00.000Z',
  ...over,
});

/** The cut-off an hour after `ourPayment`'s creation: an unknown payment older than it disagrees. */
export const sweepCutoff = Date.parse('2030-01-01T01:00:00.000Z');
