import { createHash } from 'node:crypto';
import { scopeOf, type ScopeOperation } from '../domain/ids';

/**
 * The idempotency key sent to the provider: `pw_` + the first 40 hex digits (160 bits) of SHA-256 over the scope
 * (`merchantId:operation:key`). Derived, never stored, so every attempt and every reconcile sends the same one; hashed,
 * so any user key (up to 255 printable characters) becomes one the provider accepts, and two merchants' or two
 * operations' equal keys never collide. `keyProvider`: the provider a charge failed over to (see `scopeOf`).
 */
export const providerIdempotencyKey = (
  merchantId: string,
  operation: ScopeOperation,
  key: string,
  keyProvider?: string,
): string =>
  `pw_${createHash('sha256')
    .update(scopeOf(merchantId, operation, key, keyProvider))
    .digest('hex')
    .slice(0, 40)}`;
