/**
 * The per-provider circuit breaker: its contract, the counting strategy, the in-process store and the fallback that
 * stands in for the shared store while Redis is away. The Redis store itself is `./redis` (it brings ioredis along).
 */
export * from './breaker';
export * from './counting';
export * from './fallback';
export * from './in-memory';
