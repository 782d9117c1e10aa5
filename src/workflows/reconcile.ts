import { condition, proxySinks, setHandler, workflowInfo } from '@temporalio/workflow';
import { reconcileResolvedSignal } from '../domain/definitions';
import { ErrorType } from '../domain/errors';
import type { Expectation, ReconcileInput, ReconcileResult } from '../domain/operations';
import type { PaymentSinks } from '../domain/sinks';
import { reconcileWaitSummary } from '../domain/summaries';
import type { ProviderPayment } from '../domain/provider-payment';
import { paymentMetadata, providerActivities } from './activity-options';
import { failureType, messageOf } from './failures';

/** Whether a provider payment shows that the write under reconciliation happened. */
export function meetsExpectation(p: ProviderPayment, expect: Expectation): boolean {
  switch (expect.kind) {
    case 'created':
      return p.amount === expect.amount && p.currency === expect.currency;
    case 'captured':
      return p.amountCaptured >= expect.amountCapturedAtLeast;
    case 'refunded':
      return p.amountRefunded >= expect.amountRefundedAtLeast;
    case 'voided':
      return p.status === 'voided';
  }
}

/**
 * Durable wait-and-check for one write whose outcome is unknown: wait (a webhook ends the wait early), look the write
 * up, and repeat on the schedule. After the settle window a provider that honours keys gets the same request again
 * with the same key while the key is alive. Ends `found`, with the provider's own answer, or `needs_review`; it never
 * guesses `failed`.
 */
export async function reconcileWorkflow(input: ReconcileInput): Promise<ReconcileResult> {
  // Metrics through a sink: no command, not called on replay.
  const { paymentMetrics } = proxySinks<PaymentSinks>();
  const labels = { operation: input.operation, provider: input.provider };
  paymentMetrics.reconcile({ event: 'started', ...labels });
  const result = await waitAndCheck(input);
  paymentMetrics.reconcile({ event: result.outcome, ...labels });
  return result;
}

async function waitAndCheck(input: ReconcileInput): Promise<ReconcileResult> {
  // A holder, not a `let`: TypeScript would keep a captured `let` narrowed to undefined across the await.
  const webhook: { payment?: ProviderPayment } = {};
  setHandler(reconcileResolvedSignal, (payment) => {
    if (meetsExpectation(payment, input.expect)) webhook.payment = payment;
  });
  const acts = providerActivities(workflowInfo().taskQueue, input.provider, input.capabilities, input.retry);
  const keyTtlMs = input.capabilities.keyTtlSeconds === null ? 0 : input.capabilities.keyTtlSeconds * 1000;
  let checks = 0;
  let resubmitted = false;

  for (const waitMs of input.scheduleMs) {
    await condition(() => webhook.payment !== undefined, waitMs, {
      summary: reconcileWaitSummary(input.operation, input.provider, waitMs),
    });
    if (webhook.payment) return { outcome: 'found', payment: webhook.payment, via: 'webhook', checks };
    checks += 1;
    const found = await acts.lookup.lookupPayment({
      provider: input.provider,
      merchantId: input.merchantId,
      key: input.key,
      ...(input.keyProvider === undefined ? {} : { keyProvider: input.keyProvider }),
      operation: input.operation,
      reference: input.reference,
      paymentId: input.paymentId,
      // By reference (no keys), only a payment that could be this charge counts: same amount, created after our send.
      ...(input.expect.kind === 'created'
        ? { match: { amount: input.expect.amount, currency: input.expect.currency, createdGteMs: input.firstSentAtMs } }
        : {}),
    });
    if (found && meetsExpectation(found, input.expect))
      return { outcome: 'found', payment: found, via: 'lookup', checks };

    const sinceFirstSend = Date.now() - input.firstSentAtMs;
    const keyAliveForResend = sinceFirstSend + acts.createBudgetMs < keyTtlMs;
    if (
      input.resubmit &&
      !resubmitted &&
      input.capabilities.idempotencyKeys &&
      sinceFirstSend >= input.settleWindowMs &&
      keyAliveForResend
    ) {
      // Safe only because the provider stores the key: if the first request did commit, this replays its answer.
      resubmitted = true;
      const r = input.resubmit;
      try {
        const result = await acts.write.createPayment({
          provider: input.provider,
          merchantId: input.merchantId,
          key: input.key,
          ...(input.keyProvider === undefined ? {} : { keyProvider: input.keyProvider }),
          input: {
            amount: r.amount,
            currency: r.currency,
            reference: input.reference,
            paymentMethod: r.paymentMethod,
            capture: r.capture,
            metadata: paymentMetadata(input.merchantId, input.key),
          },
          notBeforeMs: input.firstSentAtMs,
          afterUnknown: true,
        });
        if (result.outcome === 'declined') return { outcome: 'declined', declineCode: result.declineCode, checks };
        return { outcome: 'found', payment: result.payment, via: 'resubmit', checks };
      } catch (err) {
        const type = failureType(err);
        if (type === ErrorType.ProviderRejected) return { outcome: 'rejected', reason: messageOf(err), checks };
        // Unknown again: keep checking on the schedule.
      }
    }
  }
  const hours = input.scheduleMs.reduce((a, b) => a + b, 0) / 3_600_000;
  return {
    outcome: 'needs_review',
    reason: `${input.operation} not found at ${input.provider} after ${checks} checks over ${hours.toFixed(2)} h${
      resubmitted ? ' and one resubmission with the same key' : ''
    }`,
    checks,
  };
}
