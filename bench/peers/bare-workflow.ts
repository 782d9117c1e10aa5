/**
 * The bare-workflow peer of the bench: a charge the way the Temporal samples would write it. One activity that calls
 * the provider with an idempotency key, Temporal's default retry policy, no update, no webhooks, no search attributes,
 * no refund window: the workflow ends when the provider answered. Bundled for the bench only (never in src/workflows).
 */
import { proxyActivities } from '@temporalio/workflow';
import type { BareActivities, BareChargeInput, BareChargeResult } from './bare-activities';

const { createPaymentBare } = proxyActivities<BareActivities>({ startToCloseTimeout: '10s' });

/** Charges once: the provider's answer is the workflow's result. */
export async function bareChargeWorkflow(input: BareChargeInput): Promise<BareChargeResult> {
  return createPaymentBare(input);
}
