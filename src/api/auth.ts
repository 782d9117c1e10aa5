import { createHash, timingSafeEqual } from 'node:crypto';

/** One configured API token and the merchant it acts for (config `API_TOKENS`). */
export interface TokenEntry {
  readonly merchantId: string;
  readonly token: string;
}

const digest = (value: string): Buffer => createHash('sha256').update(value, 'utf8').digest();

/**
 * A verifier for `Authorization: Bearer <token>` headers: the merchant the token maps to, or undefined. Tokens are
 * compared as SHA-256 digests with `timingSafeEqual` against every entry (no early exit), so neither the length nor a
 * prefix of a valid token leaks through timing.
 */
export function createTokenVerifier(
  entries: readonly TokenEntry[],
): (authorization: string | undefined) => string | undefined {
  const table = entries.map((e) => ({ merchantId: e.merchantId, digest: digest(e.token) }));
  return (authorization) => {
    const match = /^Bearer +([^\s]+) *$/i.exec(authorization ?? '');
    const presented = digest(match?.[1] ?? '');
    let merchantId: string | undefined;
    for (const entry of table) {
      if (timingSafeEqual(presented, entry.digest) && merchantId === undefined && match) merchantId = entry.merchantId;
    }
    return merchantId;
  };
}
