/** The secrets: bearer tokens of merchants, operators and codec readers, the payload keys and their development defaults. */
import { hkdfSync } from 'node:crypto';
import { z } from 'zod';
import { type PayloadKeys, PayloadKeysError, parsePayloadKeys } from '../codec';
import { MerchantId } from '../domain/payment';
import { type ConfigIssue, type RawEnv, issuesOf } from './issues';

/** The bearer tokens the API accepts, by role. */
export interface Credentials {
  readonly API_TOKENS: readonly { readonly merchantId: string; readonly token: string }[];
  /** Empty in production unless set: no development operator token there. */
  readonly OPERATOR_TOKENS: readonly { readonly operatorId: string; readonly token: string }[];
  /** Decode-only codec tokens; none unless set. */
  readonly CODEC_TOKENS: readonly { readonly codecId: string; readonly token: string }[];
}

/** Development-only defaults for the secrets; never used when NODE_ENV=production. */
export const developmentDefaults = {
  PROVIDER_API_KEY: 'sk_dev_payment_workflows',
  API_TOKENS: 'dev_merchant:pw_dev_token_change_me',
  OPERATOR_TOKENS: 'dev_operator:pw_dev_operator_token_change_me',
  WEBHOOK_SECRET: 'whsec_dev_payment_workflows',
  /** A fixed development key (base64 of 32 bytes): anyone with this repository can decrypt what it encrypted. */
  PAYLOAD_KEYS: 'dev1:cGF5bWVudC13b3JrZmxvd3MtZGV2LWtleS0zMmJ5dGU=',
} as const;

/** A bearer token an API client presents: no separators, no whitespace. */
const ApiToken = z.string().regex(/^[A-Za-z0-9._~+/=-]{16,256}$/, {
  message: 'every token must be 16-256 characters of A-Z a-z 0-9 . _ ~ + / = -',
});

/** An operator's id: recorded in audits as `operator:<operatorId>`. */
const OperatorId = z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, {
  message: 'operatorId must be 1-64 characters of A-Z, a-z, 0-9, _ or -',
});

/** `<id>:token,<id>:token`: several tokens may map to one id; a token maps to exactly one. */
const tokenPairs = (idSchema: z.ZodType<string>, idName: string) =>
  z.string().transform((v, ctx) => {
    const pairs: { id: string; token: string }[] = [];
    for (const entry of v
      .split(',')
      .map((e) => e.trim())
      .filter((e) => e.length > 0)) {
      const colon = entry.indexOf(':');
      const id = idSchema.safeParse(colon === -1 ? '' : entry.slice(0, colon));
      const token = ApiToken.safeParse(colon === -1 ? '' : entry.slice(colon + 1));
      if (colon === -1) ctx.addIssue({ code: 'custom', message: `every entry must be ${idName}:token` });
      else if (!id.success) ctx.addIssue({ code: 'custom', message: id.error.issues[0]?.message ?? '' });
      else if (!token.success) ctx.addIssue({ code: 'custom', message: token.error.issues[0]?.message ?? '' });
      else pairs.push({ id: id.data, token: token.data });
    }
    if (pairs.length === 0 && ctx.issues.length === 0)
      ctx.addIssue({ code: 'custom', message: `no ${idName}:token pair` });
    if (new Set(pairs.map((p) => p.token)).size !== pairs.length) {
      ctx.addIssue({ code: 'custom', message: 'a token is listed twice' });
    }
    return pairs;
  });

/** `merchantId:token,merchantId:token` (config `API_TOKENS`). */
const apiTokens = tokenPairs(MerchantId, 'merchantId').transform((pairs) =>
  pairs.map(({ id, token }) => ({ merchantId: id, token })),
);
/** `operatorId:token,operatorId:token` (config `OPERATOR_TOKENS`). */
const operatorTokens = tokenPairs(OperatorId, 'operatorId').transform((pairs) =>
  pairs.map(({ id, token }) => ({ operatorId: id, token })),
);

/** `codecId:token,codecId:token` (config `CODEC_TOKENS`): decode-only tokens. */
const codecTokens = tokenPairs(OperatorId, 'codecId').transform((pairs) =>
  pairs.map(({ id, token }) => ({ codecId: id, token })),
);

/** A log-hash key derived from the current payload key (HKDF-SHA-256, its own label): never the key itself. */
export const derivedLogHashSecret = (keys: PayloadKeys): string =>
  Buffer.from(hkdfSync('sha256', keys.current.key, Buffer.alloc(0), 'payment-workflows log key hash', 32)).toString(
    'base64',
  );

/** In production every secret is set explicitly: the development defaults are in this repository. */
export function requireProductionSecrets(raw: RawEnv, production: boolean, issues: ConfigIssue[]): void {
  for (const name of ['PROVIDER_API_KEY', 'API_TOKENS', 'WEBHOOK_SECRET', 'PAYLOAD_KEYS'] as const) {
    if (production && raw[name] === undefined) {
      issues.push({ variable: name, message: 'is required when NODE_ENV=production (no development default)' });
    }
  }
}

/** The bearer tokens of merchants, operators and codec readers; no token may open two doors. Undefined: refused. */
export function readCredentials(raw: RawEnv, production: boolean, issues: ConfigIssue[]): Credentials | undefined {
  const tokens = apiTokens.safeParse(raw.API_TOKENS ?? developmentDefaults.API_TOKENS);
  if (!tokens.success) issues.push(...issuesOf(tokens.error, 'API_TOKENS'));
  // In production no operator token unless one is configured: a development default there would be a known password.
  const operatorSource = raw.OPERATOR_TOKENS ?? (production ? undefined : developmentDefaults.OPERATOR_TOKENS);
  const operators = operatorSource === undefined ? undefined : operatorTokens.safeParse(operatorSource);
  if (operators && !operators.success) issues.push(...issuesOf(operators.error, 'OPERATOR_TOKENS'));
  if (tokens.success && operators?.success) {
    const merchantTokens = new Set(tokens.data.map((t) => t.token));
    if (operators.data.some((o) => merchantTokens.has(o.token))) {
      issues.push({ variable: 'OPERATOR_TOKENS', message: 'a token is both a merchant token and an operator token' });
    }
  }
  const codecReaders = raw.CODEC_TOKENS === undefined ? undefined : codecTokens.safeParse(raw.CODEC_TOKENS);
  if (codecReaders && !codecReaders.success) issues.push(...issuesOf(codecReaders.error, 'CODEC_TOKENS'));
  if (codecReaders?.success) {
    const others = new Set([
      ...(tokens.success ? tokens.data.map((t) => t.token) : []),
      ...(operators?.success ? operators.data.map((o) => o.token) : []),
    ]);
    if (codecReaders.data.some((c) => others.has(c.token))) {
      issues.push({ variable: 'CODEC_TOKENS', message: 'a codec token is also a merchant or operator token' });
    }
  }
  if (production && raw.CODEC_TRUSTED_ORIGINS !== undefined) {
    issues.push({
      variable: 'CODEC_TRUSTED_ORIGINS',
      message: 'is for development only: in production the web UI’s auth proxy presents a CODEC_TOKENS token',
    });
  }
  if (!tokens.success || operators?.success === false || codecReaders?.success === false) return undefined;
  return {
    API_TOKENS: tokens.data,
    OPERATOR_TOKENS: operators?.success ? operators.data : [],
    CODEC_TOKENS: codecReaders?.success ? codecReaders.data : [],
  };
}

/** `PAYLOAD_KEYS` (or the development key), parsed into the key ring. */
export function readPayloadKeys(raw: RawEnv, issues: ConfigIssue[]): PayloadKeys | undefined {
  try {
    return parsePayloadKeys(raw.PAYLOAD_KEYS ?? developmentDefaults.PAYLOAD_KEYS);
  } catch (err) {
    if (!(err instanceof PayloadKeysError)) throw err;
    issues.push({ variable: 'PAYLOAD_KEYS', message: err.message });
    return undefined;
  }
}
