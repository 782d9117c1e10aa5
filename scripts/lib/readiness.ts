/** The readiness probes the stack scripts poll: an HTTP URL that answers 2xx, a Temporal frontend that serves. */
import { Connection } from '@temporalio/client';

/** Whether `url` answers 2xx within a second. */
export async function isUp(url: string): Promise<boolean> {
  try {
    return (await fetch(url, { signal: AbortSignal.timeout(1_000) })).ok;
  } catch {
    return false;
  }
}

/** Whether the Temporal frontend at `address` answers its gRPC health check with SERVING. */
export async function temporalServing(address: string): Promise<boolean> {
  let connection: Connection | undefined;
  try {
    connection = await Connection.connect({ address, connectTimeout: 1_000 });
    const c = connection;
    const res = await c.withDeadline(Date.now() + 2_000, () => c.healthService.check({}));
    return res.status === 1; // SERVING
  } catch {
    return false;
  } finally {
    await connection?.close().catch(() => undefined);
  }
}
