import { createHmac } from 'node:crypto';

// The simulator stands for a third party: it signs its webhooks with its own code (node:crypto only). Receivers
// verify with the REST adapter's verifier (src/providers/rest/webhook.ts), never with this file.

/** Name of the webhook signature header. */
export const SIGNATURE_HEADER = 'Sim-Signature';

const hmacHex = (secret: string, t: number, rawBody: string | Uint8Array): string =>
  createHmac('sha256', secret).update(`${t}.`).update(rawBody).digest('hex');

/** The `Sim-Signature` header value for a body: `t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<raw body>">`. */
export function signWebhook(secret: string, body: string | Uint8Array, t: number): string {
  return `t=${t},v1=${hmacHex(secret, t, body)}`;
}
