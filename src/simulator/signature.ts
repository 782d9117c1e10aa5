import { createHmac, timingSafeEqual } from 'node:crypto';

// Self-contained on purpose (node:crypto only): the API copies this logic to verify provider webhooks.

/** Name of the webhook signature header. */
export const SIGNATURE_HEADER = 'Sim-Signature';

const hmacHex = (secret: string, t: number, rawBody: string | Uint8Array): string =>
  createHmac('sha256', secret).update(`${t}.`).update(rawBody).digest('hex');

/** The `Sim-Signature` header value for a body: `t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<raw body>">`. */
export function signWebhook(secret: string, body: string | Uint8Array, t: number): string {
  return `t=${t},v1=${hmacHex(secret, t, body)}`;
}

/** Why a signature was refused. */
export type SignatureFailure = 'missing' | 'malformed' | 'stale' | 'mismatch';

/** The outcome of {@link verifyWebhookSignature}. */
export type SignatureCheck = { ok: true; t: number } | { ok: false; reason: SignatureFailure };

/** Options of {@link verifyWebhookSignature}: the allowed clock distance and the verifier's time, in seconds. */
export interface VerifyOptions {
  toleranceS: number;
  nowS: number;
}

/**
 * Checks a `Sim-Signature` header against the raw body (the exact bytes received, before any JSON parsing).
 * Accepts any of several `v1` entries (secret rotation) and refuses timestamps further than `toleranceS` from `nowS`
 * in either direction (replays of old events, and clocks that lie).
 */
export function verifyWebhookSignature(
  secret: string,
  header: string | undefined | null,
  rawBody: string | Uint8Array,
  { toleranceS, nowS }: VerifyOptions,
): SignatureCheck {
  if (!header) return { ok: false, reason: 'missing' };
  let t: number | undefined;
  const candidates: string[] = [];
  for (const part of header.split(',')) {
    const eq = part.indexOf('=');
    if (eq < 0) continue;
    const name = part.slice(0, eq).trim();
    const value = part.slice(eq + 1).trim();
    if (name === 't' && /^\d{1,12}$/.test(value)) t = Number(value);
    else if (name === 'v1' && /^[0-9a-f]{64}$/i.test(value)) candidates.push(value.toLowerCase());
  }
  if (t === undefined || candidates.length === 0) return { ok: false, reason: 'malformed' };
  if (Math.abs(nowS - t) > toleranceS) return { ok: false, reason: 'stale' };
  const expected = Buffer.from(hmacHex(secret, t, rawBody), 'hex');
  // Every candidate is compared in constant time; lengths are equal by construction (64 hex chars).
  const matched = candidates.some((c) => timingSafeEqual(expected, Buffer.from(c, 'hex')));
  return matched ? { ok: true, t } : { ok: false, reason: 'mismatch' };
}
