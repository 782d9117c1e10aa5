/**
 * `payment-workflows/worker`: the payment workers inside an order service's process, on its own Temporal connection
 * with its own providers, and the parts to build them from (provider adapters, breakers, metrics, the payload codec).
 */
export {
  createPaymentWorkers,
  prebuiltWorkflowBundlePath,
  workflowBundleSpecifier,
  type PaymentSweepOptions,
  type PaymentWorkers,
  type PaymentWorkersOptions,
} from '../payment-workers';
export {
  StripeProvider,
  createProvider,
  simulatorCapabilities,
  simulatorCapabilitiesWithoutKeys,
  stripeCapabilities,
  type PaymentProvider,
  type ProviderCapabilities,
  type RestProviderConfig,
  type StripeProviderConfig,
} from '../providers';
export { InMemoryCircuitBreaker, type CircuitBreaker } from '../breaker';
export { createBreaker } from '../stack';
export { createWorkerMetrics, type WorkerMetrics } from '../metrics/worker-metrics';
export { AesGcmPayloadCodec, newPayloadKey, parsePayloadKeys, type PayloadKeys } from '../codec';
