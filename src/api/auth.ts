import { createHash, timingSafeEqual } from 'node:crypto';

/** One configured API token and the merchant it acts for (config `API_TOKENS`). */
export interface TokenEntry {
  readonly merchantId: string;
  readonly token: string;
}

/** One configured operator token and the operator it names (config `OPERATOR_TOKENS`). */
export interface OperatorTokenEntry {
  readonly operatorId: string;
  readonly token: string;
}

/**
 * Who a bearer token speaks for. A merchant acts on its own payments; an operator resolves reviews (any merchant's,
 * named explicitly) and does nothing else.
 */
export type Principal =
  | { readonly role: 'merchant'; readonly merchantId: string }
  | { readonly role: 'operator'; readonly operatorId: string };

/** The roles a route admits. */
export type Role = Principal['role'];

const digest = (value: string): Buffer => createHash('sha256').update(value, 'utf8').digest();

/**
 * A verifier for `Authorization: Bearer <token>` headers: the merchant or operator the token maps to, or undefined.
 * Tokens are compared as SHA-256 digests with `timingSafeEqual` against every entry of both tables (no early exit),
 * so neither the length, a prefix nor the role of a valid token leaks through timing.
 */
export function createTokenVerifier(
  merchants: readonly TokenEntry[],
  operators: readonly OperatorTokenEntry[] = [],
): (authorization: string | undefined) => Principal | undefined {
  const table: { principal: Principal; digest: Buffer }[] = [
    ...merchants.map((e) => ({
      principal: { role: 'merchant' as const, merchantId: e.merchantId },
      digest: digest(e.token),
    })),
    ...operators.map((e) => ({
      principal: { role: 'operator' as const, operatorId: e.operatorId },
      digest: digest(e.token),
    })),
  ];
  return (authorization) => {
    const match = /^Bearer +([^\s]+) *$/i.exec(authorization ?? '');
    const presented = digest(match?.[1] ?? '');
    let principal: Principal | undefined;
    for (const entry of table) {
      if (timingSafeEqual(presented, entry.digest) && principal === undefined && match) principal = entry.principal;
    }
    return principal;
  };
}
