import { Context } from '@temporalio/activity';

/** Whether the caller runs in a local activity (a workflow task's own step), not in a regular one or outside any. */
export function inLocalActivity(): boolean {
  try {
    return Context.current().info.isLocal;
  } catch {
    // Not in an activity (the API's own call).
    return false;
  }
}
