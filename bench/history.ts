/**
 * What a payment costs in Temporal, read from a sample of workflow histories: events, activities (and attempts),
 * local activities, timers, signals, updates, search-attribute upserts, an estimate of billable actions, and the
 * latencies the history timestamps reveal (task schedule-to-start: what eager start / eager dispatch would remove).
 */
import type { Client, WorkflowHandle } from '@temporalio/client';
import { forEachBounded } from './bounded';
import { mean } from './stats';

type History = Awaited<ReturnType<WorkflowHandle['fetchHistory']>>;
type HistoryEvent = NonNullable<History['events']>[number];

/** The counts and latencies of one payment's history. */
export interface PaymentHistoryStats {
  readonly events: number;
  readonly workflowTasks: number;
  /** Activities scheduled (each a provider call with its retry policy). */
  readonly activities: number;
  /** Attempts of those activities (retries included), from ActivityTaskStarted.attempt. */
  readonly activityAttempts: number;
  /** Local activities (markers), e.g. describeProvider. */
  readonly localActivities: number;
  readonly timers: number;
  readonly signals: number;
  readonly updates: number;
  readonly searchAttributeUpserts: number;
  readonly childWorkflows: number;
  /** A Temporal Cloud-style estimate of billable actions (see bench/README.md for the rules). */
  readonly actions: number;
  /** First workflow task: scheduled -> started (what eager workflow start removes). */
  readonly firstWorkflowTaskScheduleToStartMs: number | undefined;
  /** The provider activity's first attempt: scheduled -> started (what eager activity dispatch removes). */
  readonly activityScheduleToStartMs: number | undefined;
  /** The provider activity's last attempt: started -> completed (the provider call). */
  readonly activityStartToCloseMs: number | undefined;
  /** Workflow started -> the first provider activity completed (attempts and backoff included). */
  readonly startToActivityCompletedMs: number | undefined;
  /** Sum over the workflow tasks of started -> completed: the worker's time on this payment's workflow code. */
  readonly workflowTaskRunMs: number | undefined;
  /**
   * Workflow started -> the caller's answer was in the history (the first update completed, else the workflow
   * completed): the caller's latency minus this is the starter's own overhead (HTTP, checks, RPCs).
   */
  readonly startToAnswerMs: number | undefined;
}

/** One event of a timeline: its id, its kind (the attributes' name) and milliseconds since the workflow started. */
export interface TimelineEvent {
  readonly id: number;
  readonly kind: string;
  readonly atMs: number;
}

/** A readable timeline of one history, for the results file: where the milliseconds of a payment go. */
export function timeline(events: readonly HistoryEvent[]): TimelineEvent[] {
  const t0 = tsMs(events[0]?.eventTime) ?? 0;
  return events.map((e) => {
    const key = Object.keys(e).find((k) => k.endsWith('EventAttributes') && (e as Record<string, unknown>)[k] != null);
    return {
      id: Number(e.eventId),
      kind: key?.replace(/EventAttributes$/, '') ?? 'unknown',
      atMs: Math.round(((tsMs(e.eventTime) ?? t0) - t0) * 10) / 10,
    };
  });
}

/** Means over the sampled histories. */
export interface HistorySummary {
  readonly sampled: number;
  readonly eventsPerPayment: number;
  readonly workflowTasksPerPayment: number;
  readonly activitiesPerPayment: number;
  readonly activityAttemptsPerPayment: number;
  readonly localActivitiesPerPayment: number;
  readonly timersPerPayment: number;
  readonly signalsPerPayment: number;
  readonly updatesPerPayment: number;
  readonly searchAttributeUpsertsPerPayment: number;
  readonly childWorkflowsPerPayment: number;
  readonly actionsPerPayment: number;
  /** Medians (ms) of the history latencies. */
  readonly firstWorkflowTaskScheduleToStartMsP50: number | undefined;
  readonly activityScheduleToStartMsP50: number | undefined;
  readonly activityStartToCloseMsP50: number | undefined;
  readonly startToActivityCompletedMsP50: number | undefined;
  readonly startToActivityCompletedMsMax: number | undefined;
  readonly workflowTaskRunMsP50: number | undefined;
  readonly startToAnswerMsP50: number | undefined;
}

const tsMs = (ts: HistoryEvent['eventTime']): number | undefined =>
  ts == null ? undefined : Number(ts.seconds ?? 0) * 1000 + (ts.nanos ?? 0) / 1e6;

const diff = (a: number | undefined, b: number | undefined): number | undefined =>
  a === undefined || b === undefined ? undefined : Math.round((b - a) * 10) / 10;

/** Counts and latencies of one history. */
export function analyzeHistory(events: readonly HistoryEvent[]): PaymentHistoryStats {
  const count = (has: (e: HistoryEvent) => unknown) => events.filter((e) => has(e) != null).length;
  const byId = new Map<string, HistoryEvent>(events.map((e) => [String(e.eventId), e]));
  const startedAt = tsMs(events[0]?.eventTime);

  const wftScheduled = events.find((e) => e.workflowTaskScheduledEventAttributes != null);
  const wftStarted = events.find((e) => e.workflowTaskStartedEventAttributes != null);

  // The first provider activity (createPayment): its attempts, schedule-to-start and duration.
  const firstScheduled = events.find((e) => e.activityTaskScheduledEventAttributes != null);
  const started = events.filter((e) => e.activityTaskStartedEventAttributes != null);
  const attempts = started.reduce((sum, e) => sum + (e.activityTaskStartedEventAttributes?.attempt ?? 1), 0);
  const firstStarted = started.find(
    (e) => String(e.activityTaskStartedEventAttributes?.scheduledEventId) === String(firstScheduled?.eventId),
  );
  const firstCompleted = events.find(
    (e) =>
      e.activityTaskCompletedEventAttributes != null &&
      String(e.activityTaskCompletedEventAttributes.scheduledEventId) === String(firstScheduled?.eventId),
  );
  const firstAttempt = (firstStarted?.activityTaskStartedEventAttributes?.attempt ?? 1) === 1;
  const startedOfCompleted =
    firstCompleted && byId.get(String(firstCompleted.activityTaskCompletedEventAttributes?.startedEventId));

  let workflowTaskRunMs: number | undefined;
  for (const e of events) {
    const done = e.workflowTaskCompletedEventAttributes;
    if (done == null) continue;
    const ran = diff(tsMs(byId.get(String(done.startedEventId))?.eventTime), tsMs(e.eventTime));
    if (ran !== undefined) workflowTaskRunMs = Math.round(((workflowTaskRunMs ?? 0) + ran) * 10) / 10;
  }
  const answered =
    events.find((e) => e.workflowExecutionUpdateCompletedEventAttributes != null) ??
    events.find((e) => e.workflowExecutionCompletedEventAttributes != null);

  const activities = count((e) => e.activityTaskScheduledEventAttributes);
  const localActivities = count((e) => e.markerRecordedEventAttributes);
  const timers = count((e) => e.timerStartedEventAttributes);
  const signals = count((e) => e.workflowExecutionSignaledEventAttributes);
  const updates = count((e) => e.workflowExecutionUpdateAcceptedEventAttributes);
  const upserts = count((e) => e.upsertWorkflowSearchAttributesEventAttributes);
  const children = count((e) => e.startChildWorkflowExecutionInitiatedEventAttributes);
  return {
    events: events.length,
    workflowTasks: count((e) => e.workflowTaskCompletedEventAttributes),
    activities,
    activityAttempts: attempts + (activities - started.length), // an activity still running counts one attempt
    localActivities,
    timers,
    signals,
    updates,
    searchAttributeUpserts: upserts,
    childWorkflows: children,
    // Start 1, each activity attempt, each local activity, timer, signal, update, upsert, child start.
    actions:
      1 + attempts + (activities - started.length) + localActivities + timers + signals + updates + upserts + children,
    firstWorkflowTaskScheduleToStartMs: diff(tsMs(wftScheduled?.eventTime), tsMs(wftStarted?.eventTime)),
    activityScheduleToStartMs: firstAttempt
      ? diff(tsMs(firstScheduled?.eventTime), tsMs(firstStarted?.eventTime))
      : undefined,
    activityStartToCloseMs: diff(tsMs(startedOfCompleted?.eventTime), tsMs(firstCompleted?.eventTime)),
    startToActivityCompletedMs: diff(startedAt, tsMs(firstCompleted?.eventTime)),
    workflowTaskRunMs,
    startToAnswerMs: diff(startedAt, tsMs(answered?.eventTime)),
  } satisfies PaymentHistoryStats;
}

const median = (xs: readonly (number | undefined)[]): number | undefined => {
  const v = xs.filter((x): x is number => x !== undefined).sort((a, b) => a - b);
  return v.length === 0 ? undefined : v[Math.floor((v.length - 1) / 2)];
};
const maxOf = (xs: readonly (number | undefined)[]): number | undefined => {
  const v = xs.filter((x): x is number => x !== undefined);
  return v.length === 0 ? undefined : Math.max(...v);
};
const r2 = (x: number): number => Math.round(x * 100) / 100;

/** Averages per-payment stats. */
export function summarizeHistories(stats: readonly PaymentHistoryStats[]): HistorySummary {
  const avg = (pick: (s: PaymentHistoryStats) => number) => r2(mean(stats.map(pick)));
  return {
    sampled: stats.length,
    eventsPerPayment: avg((s) => s.events),
    workflowTasksPerPayment: avg((s) => s.workflowTasks),
    activitiesPerPayment: avg((s) => s.activities),
    activityAttemptsPerPayment: avg((s) => s.activityAttempts),
    localActivitiesPerPayment: avg((s) => s.localActivities),
    timersPerPayment: avg((s) => s.timers),
    signalsPerPayment: avg((s) => s.signals),
    updatesPerPayment: avg((s) => s.updates),
    searchAttributeUpsertsPerPayment: avg((s) => s.searchAttributeUpserts),
    childWorkflowsPerPayment: avg((s) => s.childWorkflows),
    actionsPerPayment: avg((s) => s.actions),
    firstWorkflowTaskScheduleToStartMsP50: median(stats.map((s) => s.firstWorkflowTaskScheduleToStartMs)),
    activityScheduleToStartMsP50: median(stats.map((s) => s.activityScheduleToStartMs)),
    activityStartToCloseMsP50: median(stats.map((s) => s.activityStartToCloseMs)),
    startToActivityCompletedMsP50: median(stats.map((s) => s.startToActivityCompletedMs)),
    startToActivityCompletedMsMax: maxOf(stats.map((s) => s.startToActivityCompletedMs)),
    workflowTaskRunMsP50: median(stats.map((s) => s.workflowTaskRunMs)),
    startToAnswerMsP50: median(stats.map((s) => s.startToAnswerMs)),
  };
}

/**
 * Fetches and analyzes the histories of `workflowIds` (all of them: the caller samples), four at a time, each
 * fetch bounded by `timeoutMs`; also answers the first one's timeline.
 */
export async function sampleHistories(
  client: Client,
  workflowIds: readonly string[],
  timeoutMs = 10_000,
): Promise<{ stats: PaymentHistoryStats[]; firstTimeline: TimelineEvent[] | undefined }> {
  const out: PaymentHistoryStats[] = [];
  let firstTimeline: TimelineEvent[] | undefined;
  await forEachBounded(workflowIds, 4, async (id) => {
    const history = await client.connection.withDeadline(Date.now() + timeoutMs, () =>
      client.workflow.getHandle(id).fetchHistory(),
    );
    out.push(analyzeHistory(history.events ?? []));
    if (id === workflowIds[0]) firstTimeline = timeline(history.events ?? []);
  });
  return { stats: out, firstTimeline };
}

/** Up to `k` items evenly spread over `items` (first and last included). */
export function evenSample<T>(items: readonly T[], k: number): T[] {
  if (items.length <= k) return [...items];
  return Array.from({ length: k }, (_, i) => items[Math.round((i * (items.length - 1)) / (k - 1))] as T);
}
