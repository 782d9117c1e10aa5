/** Ending a test's leftover workflows. */
import type { Client } from '@temporalio/client';

/** Terminates every workflow in `workflowIds`, ignoring the ones already closed or never started. */
export async function terminateAll(client: Client, workflowIds: Iterable<string>): Promise<void> {
  await Promise.all(
    [...workflowIds].map((id) =>
      client.workflow
        .getHandle(id)
        .terminate('test finished')
        .catch(() => undefined),
    ),
  );
}
