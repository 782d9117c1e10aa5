/**
 * The Temporal CLI dev server the way this project runs it everywhere (tests, `npm start`, the benchmark): the CLI
 * resolved through the provisioning chain, bound to loopback, with the payment search attributes registered.
 */
import { TestWorkflowEnvironment } from '@temporalio/testing';
import type { DevServerConfig } from '@temporalio/testing/lib/ephemeral-server';
import { paymentSearchAttributes } from '../../src/domain/search-attributes';
import { type ResolveOptions, TEMPORAL_CLI, resolveBinary, startWith } from './temporal-binaries';

/** Server options beyond the defaults: ports, UI, SQLite file, extra CLI args (e.g. dynamic config). */
export type DevServerOptions = Omit<DevServerConfig, 'type' | 'executable' | 'searchAttributes'>;

/** Starts a dev server; tear it down with `env.teardown()`. */
export async function startDevServer(
  options: DevServerOptions = {},
  resolve: ResolveOptions & { readonly onResolved?: (source: string) => void } = {},
): Promise<TestWorkflowEnvironment> {
  const cli = await resolveBinary(TEMPORAL_CLI, resolve);
  resolve.onResolved?.(cli.source);
  return startWith(cli, TEMPORAL_CLI, (executable) =>
    TestWorkflowEnvironment.createLocal({
      server: {
        ip: '127.0.0.1',
        log: { format: 'pretty', level: 'error' },
        ...options,
        executable,
        searchAttributes: [...paymentSearchAttributes],
      },
    }),
  );
}
