/**
 * `payments_wallet_operations_total{kind,outcome}`: every ledger operation of the process (the worker's holds,
 * debits, captures, releases and refunds; the API's credits and reads) by how it ended, counted by the ledger's
 * observer.
 */
import { Counter, type Registry } from 'prom-client';
import type { WalletObserver } from '../wallets';

const name = 'payments_wallet_operations_total';

/** The counter on `registry` (registered once), and an observer that counts into it. */
export function walletMetricsObserver(registry: Registry): WalletObserver {
  const counter =
    (registry.getSingleMetric(name) as Counter<'kind' | 'outcome'> | undefined) ??
    new Counter({
      name,
      help:
        'Wallet ledger operations by kind (credit, hold, debit, capture, release, refund, read) and outcome: applied, ' +
        'replayed (the operation id was applied before), insufficient_funds, read, not_found, or the failure type ' +
        '(DatabaseNotApplied, DatabaseOutcomeUnknown, IdempotencyKeyReused, CurrencyMismatch, HoldSettled, ...)',
      labelNames: ['kind', 'outcome'],
      registers: [registry],
    });
  return { onOperation: (kind, outcome) => counter.inc({ kind, outcome }) };
}
