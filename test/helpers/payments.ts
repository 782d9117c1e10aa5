/**
 * Payment inputs for the tests: charge requests, workflow timings short enough for real time, a payment's workflow id.
 * The world they run in is test/helpers/world.ts.
 */
import { randomUUID } from 'node:crypto';
import { chargeWorkflowId } from '../../src/domain/ids';
import type { ChargeRequestInput } from '../../src/domain/payment';
import type { ChargeWorkflowInput, PaymentTimings } from '../../src/domain/workflow-inputs';
import { workflowBundle } from './workflow-bundle';

export { workflowBundle };

/** Timings short enough for real-time tests; time-skipping tests may use production-like ones. */
export const fastTimings: PaymentTimings = {
  submitWaitMs: 2_000,
  reconcileScheduleMs: [30_000, 120_000, 600_000, 3_600_000, 21_600_000],
  settleWindowMs: 60_000,
  authorizationExpiryMs: 7 * 24 * 3_600_000,
  refundWindowMs: 30 * 24 * 3_600_000,
  unknownSweepThresholdMs: 8 * 3_600_000,
};

/** The workflow id of an input's payment. */
export const idOf = (input: ChargeWorkflowInput): string => chargeWorkflowId(input.merchantId, input.key);

/** A valid charge request; override any field. */
export const chargeRequest = (over: Partial<ChargeRequestInput> = {}): ChargeRequestInput => ({
  orderId: `order_${randomUUID()}`,
  amount: { value: 1_000, currency: 'EUR' },
  paymentMethod: 'pm_card_visa',
  ...over,
});
