/**
 * Recorded histories with a workflow task boundary moved: where a busy worker put one. A local activity's answer may
 * reach the workflow a task after the one that recorded its marker (it came in while the worker was completing that
 * task, so the worker recorded the marker with it and forced a new task to hand the answer over); a replay resolves
 * the local activity where its marker is. {@link splitHistories} gives, for each recorded history, the variants split
 * after each of its local activity markers: the same run as a busy worker could have recorded it.
 */
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { temporal } from '@temporalio/proto';
import { HISTORIES_DIR } from './workflows';

type Event = Record<string, unknown> & { eventId: string; eventType: string };
interface HistoryJson {
  events: Event[];
}

const isLocalActivityMarker = (e: Event) =>
  (e.markerRecordedEventAttributes as { markerName?: string } | undefined)?.markerName === 'core_local_activity';
const isTaskEnd = (e: Event) =>
  e.eventType === 'EVENT_TYPE_WORKFLOW_TASK_COMPLETED' || e.eventType === 'EVENT_TYPE_WORKFLOW_TASK_FAILED';

/** Shifts every event id reference above `cut` by `by`, and points a moved command at its new task completion. */
function renumber(value: unknown, cut: number, by: number, movedCompletion?: { from: number; to: number }): unknown {
  if (Array.isArray(value)) return value.map((v) => renumber(v, cut, by, movedCompletion));
  if (value === null || typeof value !== 'object') return value;
  return Object.fromEntries(
    Object.entries(value).map(([k, v]) => {
      if (!k.endsWith('EventId') || typeof v !== 'string' || !/^\d+$/.test(v)) {
        return [k, renumber(v, cut, by, movedCompletion)];
      }
      const id = Number(v);
      if (movedCompletion && k === 'workflowTaskCompletedEventId' && id === movedCompletion.from) {
        return [k, String(movedCompletion.to)];
      }
      return [k, String(id > cut ? id + by : id)];
    }),
  );
}

/** The history with a task boundary after the event at `index` (a local activity marker); undefined if none fits. */
function splitAfter(history: HistoryJson, index: number): HistoryJson | undefined {
  const events = history.events;
  const marker = events[index] as Event;
  const next = events[index + 1];
  // Only where the marker's task goes on after it (its commands, not a new task or the end).
  if (next === undefined || next.eventType.startsWith('EVENT_TYPE_WORKFLOW_TASK_')) return undefined;
  const completion = Number(
    (marker.markerRecordedEventAttributes as { workflowTaskCompletedEventId?: string }).workflowTaskCompletedEventId,
  );
  const template = events.findIndex(isTaskEnd);
  if (!completion || template < 2) return undefined;
  const [scheduled, started, completed] = events.slice(template - 2, template + 1).map((e) => structuredClone(e));
  const cut = Number(marker.eventId);
  const at = marker.eventTime;
  const ids = { scheduled: cut + 1, started: cut + 2, completed: cut + 3 };
  const boundary = [
    { ...scheduled, eventId: String(ids.scheduled), eventTime: at },
    {
      ...started,
      eventId: String(ids.started),
      eventTime: at,
      workflowTaskStartedEventAttributes: {
        ...(started?.workflowTaskStartedEventAttributes as object),
        scheduledEventId: String(ids.scheduled),
      },
    },
    {
      ...completed,
      eventId: String(ids.completed),
      eventTime: at,
      workflowTaskCompletedEventAttributes: {
        ...(completed?.workflowTaskCompletedEventAttributes as object),
        scheduledEventId: String(ids.scheduled),
        startedEventId: String(ids.started),
      },
    },
  ] as Event[];
  // The rest of the marker's task moves to the new task; everything after it only shifts.
  let inTask = true;
  const rest = events.slice(index + 1).map((e) => {
    if (e.eventType.startsWith('EVENT_TYPE_WORKFLOW_TASK_')) inTask = false;
    const moved = renumber(e, cut, 3, inTask ? { from: completion, to: ids.completed } : undefined) as Event;
    return { ...moved, eventId: String(Number(e.eventId) + 3) };
  });
  return { ...history, events: [...events.slice(0, index + 1), ...boundary, ...rest] };
}

/** One variant: `<file>#<marker event id>`, or `<file>` for the history as recorded. */
export interface HistoryVariant {
  readonly workflowId: string;
  readonly history: temporal.api.history.v1.IHistory;
}

/**
 * Every recorded history of test/histories whose name `include` accepts, split after each of its local activity
 * markers that has more of its task after it (that task completed there, a new one started, scheduled and completed,
 * the rest of the task's events in it); with `original`, the history as recorded too.
 */
export function splitHistories(include: (file: string) => boolean = () => true, original = false): HistoryVariant[] {
  const files = readdirSync(HISTORIES_DIR)
    .filter((f) => f.endsWith('.json') && include(f))
    .sort();
  const variants: HistoryVariant[] = [];
  for (const file of files) {
    const history = JSON.parse(readFileSync(path.join(HISTORIES_DIR, file), 'utf8')) as HistoryJson;
    if (original) variants.push({ workflowId: file, history: temporal.api.history.v1.History.fromObject(history) });
    history.events.forEach((e, i) => {
      if (!isLocalActivityMarker(e)) return;
      const split = splitAfter(history, i);
      if (split === undefined) return;
      variants.push({ workflowId: `${file}#${e.eventId}`, history: temporal.api.history.v1.History.fromObject(split) });
    });
  }
  return variants;
}
