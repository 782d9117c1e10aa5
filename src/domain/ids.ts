/**
 * Identity (docs/architecture.md#identity-and-key-scopes). One user intent = one key; its scope is merchant + operation + key,
 * and the workflow id derived from it is the UNIQUE constraint the Temporal server enforces. Merchant ids never contain
 * a colon (see `MerchantId`), so the key is always everything after the second colon.
 */

import type { WriteOperation } from './retry-policy';

/** The operations an idempotency key is scoped to: the provider writes (`create` is the charge). */
export type ScopeOperation = WriteOperation;

/**
 * The scope of one intent: `<merchantId>:<operation>:<key>`; the provider idempotency key is derived from it. A charge
 * that failed over sends its create to the next provider under `<merchantId>:<operation>@<provider>:<key>`: a key of
 * its own there, never one equal to another payment's (merchant ids and operations hold neither `:` nor `@`).
 */
export const scopeOf = (merchantId: string, operation: ScopeOperation, key: string, keyProvider?: string): string =>
  keyProvider === undefined ? `${merchantId}:${operation}:${key}` : `${merchantId}:${operation}@${keyProvider}:${key}`;

/**
 * Whose provider key a write or a look-up is derived from, with its operation (see {@link scopeOf}): the merchant, the
 * order service's key, and the provider a charge failed over to (absent at its first provider: the plain scope). One
 * value travels into activity arguments and reconcile inputs, so `keyProvider` is never copied on its own.
 */
export interface KeyScope {
  readonly merchantId: string;
  readonly key: string;
  readonly keyProvider?: string;
}

/** A {@link KeyScope}, holding `keyProvider` only when there is one (a first provider's payloads stay as they were). */
export const keyScope = (merchantId: string, key: string, keyProvider?: string): KeyScope =>
  keyProvider === undefined ? { merchantId, key } : { merchantId, key, keyProvider };

/** The charge workflow (the payment's single serialized state): `charge:<merchantId>:<key>`. */
export const chargeWorkflowId = (merchantId: string, key: string): string => `charge:${merchantId}:${key}`;

/** A capture under its own key: `capture:<merchantId>:<captureKey>`. */
export const captureWorkflowId = (merchantId: string, captureKey: string): string =>
  `capture:${merchantId}:${captureKey}`;

/** A refund under its own key: `refund:<merchantId>:<refundKey>`. */
export const refundWorkflowId = (merchantId: string, refundKey: string): string => `refund:${merchantId}:${refundKey}`;

/**
 * The child of one try of a capture or refund under its key: the first is `captureWorkflowId`/`refundWorkflowId` (the
 * key's merchant-wide UNIQUE constraint); a later one, run only by the payment that owns the key after every earlier
 * try provably never left, is `<kind>#<n>:<merchantId>:<key>` (a prefix of its own: it never collides with a first).
 */
export const movementTryWorkflowId = (
  kind: 'capture' | 'refund',
  merchantId: string,
  key: string,
  n: number,
): string =>
  n <= 1
    ? (kind === 'capture' ? captureWorkflowId : refundWorkflowId)(merchantId, key)
    : `${kind}#${n}:${merchantId}:${key}`;

/**
 * The reconcile child of one operation with an unknown outcome: `reconcile:<merchantId>:<operation>:<key>`, so the
 * reconcile of a charge (`create`) and of a capture whose keys happen to be equal never collide.
 */
export const reconcileWorkflowId = (merchantId: string, operation: ScopeOperation, key: string): string =>
  `reconcile:${merchantId}:${operation}:${key}`;

/** The merchant and key back from a charge workflow id, or null if it is not one. */
export const parseChargeWorkflowId = (workflowId: string): { merchantId: string; key: string } | null => {
  const match = /^charge:([^:]+):(.+)$/s.exec(workflowId);
  return match?.[1] !== undefined && match[2] !== undefined ? { merchantId: match[1], key: match[2] } : null;
};

/**
 * The activity task queue of one provider (bulkhead): workflows run on `taskQueue`, each provider's activities on a
 * queue of their own, so a slow or failing provider exhausts only its own slots.
 */
export const providerTaskQueue = (taskQueue: string, provider: string): string => `${taskQueue}.provider.${provider}`;
