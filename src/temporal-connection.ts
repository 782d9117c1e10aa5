/**
 * Temporal connection settings: the standard environment configuration (`@temporalio/envconfig`: TEMPORAL_ADDRESS,
 * TEMPORAL_NAMESPACE, TEMPORAL_API_KEY, TEMPORAL_TLS_*, TEMPORAL_PROFILE or a temporal.toml), with our validated
 * config's address and namespace as the defaults.
 */
import { loadClientConnectConfig } from '@temporalio/envconfig';
import type { NativeConnectionOptions } from '@temporalio/worker';

export interface TemporalTarget {
  readonly TEMPORAL_ADDRESS: string;
  readonly TEMPORAL_NAMESPACE: string;
  /** How long a connect waits for an unreachable server ({@link connectWithin}); absent: no wait. */
  readonly TEMPORAL_CONNECT_WAIT_MS?: number;
}

/** Connection options for both `Connection.connect` and `NativeConnection.connect`. */
export function connectionOptions(
  target: TemporalTarget,
  env: NodeJS.ProcessEnv = process.env,
): NativeConnectionOptions {
  const { connectionOptions: fromEnv } = loadClientConnectConfig({
    overrideEnvVars: Object.fromEntries(Object.entries(env).filter((e): e is [string, string] => e[1] !== undefined)),
  });
  // The profile (or TEMPORAL_ADDRESS, which envconfig reads itself) wins; our validated default comes last.
  return { ...fromEnv, address: fromEnv.address ?? target.TEMPORAL_ADDRESS };
}

/** Where a process logs its waits for the server (a pino logger fits). */
export interface ConnectLogger {
  warn(fields: Record<string, unknown>, message: string): void;
  info(fields: Record<string, unknown>, message: string): void;
}

/**
 * `connect()` until it succeeds or `waitMs` has passed since the first try (then its last error is thrown): a worker or
 * API that starts while the Temporal server restarts, or before it, waits for it instead of exiting. Its supervisor
 * would otherwise count each refused start as a crash and give up on the stack (the CI soak's cluster did, after a
 * Temporal restart between two worker kills). Waits 250 ms, doubled per refusal up to 5 s; logs the first refusal and
 * then one line per 10 s.
 */
export async function connectWithin<T>(
  connect: () => Promise<T>,
  options: {
    readonly waitMs: number;
    readonly address: string;
    readonly logger?: ConnectLogger;
    /** What is waited for, in the log lines (default: the server itself). */
    readonly what?: string;
    /** Errors worth waiting out (default: every error); any other is thrown at once. */
    readonly retryable?: (err: unknown) => boolean;
  },
): Promise<T> {
  const what = options.what ?? 'Temporal server';
  const started = Date.now();
  let delayMs = 250;
  let lastLog = 0;
  let refusals = 0;
  for (;;) {
    try {
      const connection = await connect();
      if (refusals > 0) {
        options.logger?.info(
          { address: options.address, waitedMs: Date.now() - started, refusals },
          `${what} reachable`,
        );
      }
      return connection;
    } catch (err) {
      if (options.retryable && !options.retryable(err)) throw err;
      refusals += 1;
      const waited = Date.now() - started;
      if (waited + delayMs > options.waitMs) throw err;
      if (lastLog === 0 || Date.now() - lastLog >= 10_000) {
        lastLog = Date.now();
        options.logger?.warn(
          { address: options.address, err: err instanceof Error ? err.message : String(err), waitedMs: waited },
          `${what} not reachable; retrying for up to ${Math.round(options.waitMs / 1000)} s`,
        );
      }
      await new Promise<void>((resolve) => setTimeout(resolve, delayMs));
      delayMs = Math.min(5_000, delayMs * 2);
    }
  }
}
