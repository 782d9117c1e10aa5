import { rmSync } from 'node:fs';

/**
 * Stops the shared dev server and PostgreSQL server started by the global setup (and removes the latter's data and the
 * run's workflow bundle).
 */
export default async function globalTeardown(): Promise<void> {
  await Promise.all([globalThis.__PW_DEV_SERVER__?.teardown(), globalThis.__PW_POSTGRES__?.close(true)]);
  if (globalThis.__PW_BUNDLE_DIR__) rmSync(globalThis.__PW_BUNDLE_DIR__, { recursive: true, force: true });
}
