/**
 * Workflow sinks: how workflow code reports to the worker's metrics without I/O. Sink calls produce no command, so
 * they never touch determinism, and the worker does not call them during replay.
 */
import type { Sinks } from '@temporalio/workflow';

/** What a reconcile reports: it started, or how it ended (its `ReconcileResult.outcome`). */
export interface ReconcileMetricEvent {
  readonly event: 'started' | 'found' | 'declined' | 'rejected' | 'needs_review';
  readonly operation: string;
  readonly provider: string;
}

/** A charge moved from the provider holding it to the next of its list (`reason`: why the send provably never left). */
export interface FailoverMetricEvent {
  readonly from: string;
  readonly to: string;
  readonly reason: string;
}

/** The sinks the payment workflows call; the worker injects them (src/metrics). */
export interface PaymentSinks extends Sinks {
  paymentMetrics: {
    reconcile(event: ReconcileMetricEvent): void;
    failover(event: FailoverMetricEvent): void;
  };
}
