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

/** One configured decode-only token and the reader it names (config `CODEC_TOKENS`). */
export interface CodecTokenEntry {
  readonly codecId: string;
  readonly token: string;
}

/**
 * Who a bearer token speaks for. A merchant acts on its own payments; an operator resolves reviews (any merchant's,
 * named explicitly) and uses the codec; a codec reader (the auth proxy in front of the web UI, a script) decodes
 * payloads and does nothing else: it can neither resolve nor move money.
 */
export type Principal =
  | { readonly role: 'merchant'; readonly merchantId: string }
  | { readonly role: 'operator'; readonly operatorId: string }
  | { readonly role: 'codec'; readonly codecId: string };

/** The roles a route admits. */
export type Role = Principal['role'];

const digest = (value: string): Buffer => createHash('sha256').update(value, 'utf8').digest();

/**
 * A verifier for `Authorization: Bearer <token>` headers: the merchant or operator the token maps to, or undefined.
 * Tokens are compared as SHA-256 digests with `timingSafeEqual` against every entry of every table (no early exit),
 * so neither the length, a prefix nor the role of a valid token leaks through timing.
 */
export function createTokenVerifier(
  merchants: readonly TokenEntry[],
  operators: readonly OperatorTokenEntry[] = [],
  codecReaders: readonly CodecTokenEntry[] = [],
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
    ...codecReaders.map((e) => ({
      principal: { role: 'codec' as const, codecId: e.codecId },
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
