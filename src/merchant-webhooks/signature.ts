/**
 * `Payments-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<raw body>">`, keyed by the endpoint's secret, as
 * the provider signs its own webhooks (docs/http-api.md, "Webhooks to your endpoint"). The verifier is what a merchant's receiver does (the tests,
 * the demo's receiver and docs/http-api.md use it).
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

/** The header that carries the signature. */
export const signatureHeader = 'Payments-Signature';

/** A new endpoint secret: `whsec_` and 32 random bytes, base64url. */
export const newEndpointSecret = (): string => `whsec_${randomBytes(32).toString('base64url')}`;

const hmacHex = (secret: string, t: number, body: string): string =>
  createHmac('sha256', secret).update(`${t}.`).update(body).digest('hex');

/** The header value for `body` sent at `t` (unix seconds). */
export const signEvent = (secret: string, body: string, t: number): string => `t=${t},v1=${hmacHex(secret, t, body)}`;

/**
 * Whether `header` signs `body` with `secret` within `toleranceS` of `nowS` (replays of an old delivery are refused).
 * Any of several `v1=` values may match (a receiver given two secrets while rotating checks each).
 */
export function verifyEventSignature(
  header: string | undefined,
  body: string,
  secret: string,
  toleranceS = 300,
  nowS: number = Math.floor(Date.now() / 1000),
): boolean {
  if (header === undefined) return false;
  const parts = header.split(',').map((p) => p.trim().split('='));
  const t = Number(parts.find(([k]) => k === 't')?.[1]);
  if (!Number.isInteger(t) || Math.abs(nowS - t) > toleranceS) return false;
  const expected = Buffer.from(hmacHex(secret, t, body), 'hex');
  return parts
    .filter(([k, v]) => k === 'v1' && v !== undefined && /^[0-9a-f]{64}$/.test(v))
    .some(([, v]) => timingSafeEqual(Buffer.from(v as string, 'hex'), expected));
}
