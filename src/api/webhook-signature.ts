import { createHmac, timingSafeEqual } from 'node:crypto';

/** Why a webhook signature was refused. */
export type SignatureFailure = 'missing' | 'malformed' | 'stale' | 'mismatch';

/** The outcome of {@link verifySignature}. */
export type SignatureCheck =
  { readonly ok: true; readonly t: number } | { readonly ok: false; readonly reason: SignatureFailure };

const hmacHex = (secret: string, t: number, rawBody: string): string =>
  createHmac('sha256', secret).update(`${t}.`).update(rawBody).digest('hex');

/**
 * Checks a `Sim-Signature: t=<unix s>,v1=<hex HMAC-SHA256 of "t.rawBody">` header against the raw body as received
 * (the same scheme as the simulator's `signature.ts`; the API keeps its own copy, it may not import the simulator).
 * Several `v1` entries are accepted (secret rotation); timestamps further than `toleranceS` from now either way are
 * refused (replays of old events, lying clocks). Every comparison is constant-time.
 */
export function verifySignature(
  secret: string,
  header: string | undefined,
  rawBody: string,
  toleranceS: number,
  nowS: number = Math.floor(Date.now() / 1000),
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
  let matched = false;
  for (const c of candidates) matched = timingSafeEqual(expected, Buffer.from(c, 'hex')) || matched;
  return matched ? { ok: true, t } : { ok: false, reason: 'mismatch' };
}
