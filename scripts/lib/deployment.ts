/**
 * The production-shaped deployment in one place: the Temporal server, admin-tools and web UI versions, the namespace
 * and its retention, the shard count and how many workers and APIs run. `npm run cluster` (scripts/cluster.ts and
 * scripts/lib/temporal-server.ts) is built from it; docker-compose.yml cannot import it, so
 * test/foundation/compose.test.ts fails when the file says anything else (image tags, NUM_HISTORY_SHARDS, retention,
 * replicas).
 */
export const deployment = {
  /** `temporalio/server:<v>`; `go.temporal.io/server` v<v> for the cluster. The CLI 1.9.1 dev server runs 1.32.x. */
  temporalServer: '1.32.2',
  /** `temporalio/admin-tools:<v>`: the sql tool and CLI of the same server release. */
  adminTools: '1.32.2',
  /** `temporalio/ui:<v>`; `github.com/temporalio/ui-server/v2` v<v> for the cluster (the CLI 1.9.1 dev server's UI). */
  temporalUi: '2.54.1',
  namespace: 'default',
  /** How long a closed workflow's history stays (the namespace's retention). */
  namespaceRetention: '72h',
  numHistoryShards: 4,
  workers: 3,
  apis: 2,
} as const;
