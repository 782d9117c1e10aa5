/**
 * The provider activities: the contract workflow code imports (as types only: `import type { Activities } from
 * '../activities'`) and the factory the worker registers. The attempt pipeline every one of them runs is `./attempt/`;
 * the sweep's and the wallets' activities are `./sweep` and `./wallets`.
 */
export * from './contract';
export { createActivities, type ActivityDeps, type Activities } from './provider-activities';
export type { AttemptHistory, BudgetExhaustedInfo, ProviderFailureInfo } from './attempt/failure';
export { providerIdempotencyKey } from './keys';
