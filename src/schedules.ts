/**
 * Temporal Schedules the worker keeps in place: the reconcile sweep of its task queue. Created idempotently at
 * start-up, so every worker of a deployment may call it; the server's schedule id is the uniqueness constraint.
 */
import {
  type Client,
  type ScheduleDescription,
  type ScheduleOptionsStartWorkflowAction,
  ScheduleAlreadyRunning,
  ScheduleOverlapPolicy,
} from '@temporalio/client';
import { canonicalJson } from './domain/payment';
import type { RetryOverrides } from './domain/retry-policy';
import { SweepInput, sweepScheduleId } from './domain/sweep';
import type { reconcileSweepWorkflow } from './workflows/sweep';

/** What the sweep schedule runs and how often. */
export interface SweepScheduleOptions {
  /** The workflow task queue: the sweep runs there and sweeps that deployment's payments. */
  readonly taskQueue: string;
  /** Rounded to whole seconds (the schedule's resolution). */
  readonly intervalMs: number;
  /** At least the settle window (see `SweepInput.lookbackMs`). */
  readonly lookbackMs: number;
  /** `timings.unknownSweepThresholdMs`. */
  readonly unknownThresholdMs: number;
  /** The providers configured on the worker. */
  readonly providers: readonly string[];
  /** The worker's retry overrides (`config.retry`): the sweep's provider calls use the charges' presets. */
  readonly retry?: RetryOverrides;
  /** Default `reconcile-sweep:<taskQueue>`. */
  readonly scheduleId?: string;
}

/** What {@link ensureSweepSchedule} found and did. */
export interface EnsuredSchedule {
  readonly scheduleId: string;
  readonly outcome: 'created' | 'unchanged' | 'updated';
}

const MINUTE = 60_000;

/**
 * Creates the sweep schedule, or leaves it alone when it already runs with this configuration, or updates its spec,
 * action and policies when the configuration changed (a new interval or lookback after a deploy). Its paused state
 * and note are kept: an operator who paused the sweep keeps it paused across worker restarts.
 * Throws a ZodError when the options do not make a valid sweep input.
 */
export async function ensureSweepSchedule(client: Client, opts: SweepScheduleOptions): Promise<EnsuredSchedule> {
  const intervalMs = Math.max(1_000, Math.round(opts.intervalMs / 1_000) * 1_000);
  const input = SweepInput.parse({
    providers: [...opts.providers],
    intervalMs,
    lookbackMs: opts.lookbackMs,
    unknownThresholdMs: opts.unknownThresholdMs,
    ...(opts.retry === undefined || Object.keys(opts.retry).length === 0 ? {} : { retry: opts.retry }),
  });
  const scheduleId = opts.scheduleId ?? sweepScheduleId(opts.taskQueue);
  const spec = { intervals: [{ every: intervalMs }] };
  const action = {
    type: 'startWorkflow',
    workflowType: 'reconcileSweepWorkflow',
    // The server appends the scheduled time to it: `reconcile-sweep:<taskQueue>-<time>`.
    workflowId: scheduleId,
    taskQueue: opts.taskQueue,
    args: [input],
    // Under SKIP a run that never ends would block every later one; a run's own activities are bounded well within.
    workflowExecutionTimeout: Math.max(intervalMs, 30 * MINUTE),
  } satisfies ScheduleOptionsStartWorkflowAction<typeof reconcileSweepWorkflow>;
  const policies = {
    // A sweep still running when the next is due makes the next one redundant: its window overlaps the next run's.
    overlap: ScheduleOverlapPolicy.SKIP,
    // After an outage one catch-up run is enough (the windows overlap); older missed runs are dropped.
    catchupWindow: Math.max(intervalMs, MINUTE),
    pauseOnFailure: false,
  };

  try {
    await client.schedule.create({ scheduleId, spec, action, policies });
    return { scheduleId, outcome: 'created' };
  } catch (err) {
    if (!(err instanceof ScheduleAlreadyRunning)) throw err;
  }
  const handle = client.schedule.getHandle(scheduleId);
  if (sameSchedule(await handle.describe(), { spec, action, policies })) return { scheduleId, outcome: 'unchanged' };
  await handle.update((current) => ({ spec, action, policies, state: current.state }));
  return { scheduleId, outcome: 'updated' };
}

/** The parts of a sweep schedule {@link ensureSweepSchedule} owns. */
interface WantedSchedule {
  readonly spec: { readonly intervals: readonly { readonly every: number }[] };
  readonly action: {
    readonly workflowType: string;
    readonly workflowId: string;
    readonly taskQueue: string;
    readonly args: readonly unknown[];
    readonly workflowExecutionTimeout: number;
  };
  readonly policies: { readonly overlap: ScheduleOverlapPolicy; readonly catchupWindow: number };
}

/** Whether a described schedule already has this spec, action and policies (as the server normalised them). */
function sameSchedule(current: ScheduleDescription, wanted: WantedSchedule): boolean {
  const { spec, action, policies } = current;
  const intervals = spec.intervals ?? [];
  return (
    intervals.length === 1 &&
    intervals[0]?.every === wanted.spec.intervals[0]?.every &&
    (intervals[0]?.offset ?? 0) === 0 &&
    (spec.calendars ?? []).length === 0 &&
    action.workflowType === wanted.action.workflowType &&
    action.workflowId === wanted.action.workflowId &&
    action.taskQueue === wanted.action.taskQueue &&
    action.workflowExecutionTimeout === wanted.action.workflowExecutionTimeout &&
    canonicalJson(action.args ?? []) === canonicalJson(wanted.action.args) &&
    policies.overlap === wanted.policies.overlap &&
    policies.catchupWindow === wanted.policies.catchupWindow
  );
}
