/** Stops the shared dev server started by the global setup. */
export default async function globalTeardown(): Promise<void> {
  await globalThis.__PW_DEV_SERVER__?.teardown();
}
