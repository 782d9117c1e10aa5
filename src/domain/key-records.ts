/**
 * Key records (docs/operations.md#key-records): what a payment hands to the key-record table when one of its keys first
 * answers for good, and what the client reads back when the workflow that answered is gone.
 */
import type { PaymentView } from './payment';

/** The intents whose keys are recorded: the charge's own key, and each capture's and refund's. */
export type RecordedOperation = 'charge' | 'capture' | 'refund';

/** A key's first terminal answer, as the payment hands it over. */
export interface KeyAnswer {
  readonly merchantId: string;
  readonly operation: RecordedOperation;
  readonly key: string;
  /** The fingerprint of the request that used the key: another body under it is refused (422). */
  readonly fingerprint: string;
  /** The payment as the key first answered it (a capture or refund: that operation in `operations[]`, final). */
  readonly view: PaymentView;
}

/** The client's read of the table: the live record of a key (an expired one answers nothing), or undefined. */
export interface KeyRecordReader {
  find(
    operation: RecordedOperation,
    merchantId: string,
    key: string,
  ): Promise<{ readonly fingerprint: string; readonly view: unknown } | undefined>;
}
