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
