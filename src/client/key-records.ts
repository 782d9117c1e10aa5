/**
 * Repeats answered from key records (docs/operations.md#key-records): a key's first final answer outlives its workflow
 * (deleted, or past the namespace retention), so a repeat then replays it instead of starting anything.
 */
import type { KeyRecordReader, RecordedOperation } from '../domain/key-records';
import { PaymentView } from '../domain/payment';
import { IdempotencyKeyReused, ProviderRejected } from './errors';

/**
 * The recorded answer of a key for a request with `fingerprint`, or undefined (no reader, or no live record). Another
 * fingerprint is {@link IdempotencyKeyReused}. A database failure propagates (the API answers 503): a repeat is never
 * started again on a guess that its key has no record.
 */
export async function recordedAnswer(
  reader: KeyRecordReader | undefined,
  operation: RecordedOperation,
  merchantId: string,
  key: string,
  fingerprint: string,
): Promise<PaymentView | undefined> {
  const record = await reader?.find(operation, merchantId, key);
  if (record === undefined) return undefined;
  if (record.fingerprint !== fingerprint) {
    throw new IdempotencyKeyReused(
      operation === 'charge'
        ? 'This idempotency key was used for a different payment request'
        : `This idempotency key was used for another ${operation}`,
    );
  }
  return PaymentView.parse(record.view);
}

/**
 * A capture's or refund's answer from a view that shows it: refused by the provider is {@link ProviderRejected};
 * otherwise the view, completed once the operation succeeded.
 */
export function operationAnswer(
  view: PaymentView,
  kind: 'capture' | 'refund',
  opKey: string,
  replayed: boolean,
): { view: PaymentView; completed: boolean; replayed: boolean } | undefined {
  const op = view.operations?.find((o) => o.kind === kind && o.key === opKey);
  if (op === undefined) return undefined;
  if (op.state === 'rejected') {
    throw new ProviderRejected(
      `The provider refused this ${kind}${op.reason === undefined ? '' : `: ${op.reason}`}`,
      op.providerCode,
      { replayed },
    );
  }
  return { view, completed: op.state === 'succeeded', replayed };
}
