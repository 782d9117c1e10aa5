import { createHmac, timingSafeEqual } from 'node:crypto';
import { z } from 'zod';
import type { ProviderEvent } from '../../domain/provider-payment';
import type { WebhookHeaders, WebhookVerdict, WebhookVerifier } from '../types';
import { ProviderPaymentWire, toPayment } from './wire';

/** The header the simulator signs its webhooks in: `t=<unix s>,v1=<hex HMAC-SHA256 of "t.rawBody">`. */
export const SIMULATOR_SIGNATURE_HEADER = 'Sim-Signature';

/** Why a `Sim-Signature` was refused. */
export type SignatureFailure = 'missing' | 'malformed' | 'stale' | 'mismatch';

/** The outcome of {@link verifySimulatorSignature}. */
export type SignatureCheck =
  { readonly ok: true; readonly t: number } | { readonly ok: false; readonly reason: SignatureFailure };

const hmacHex = (secret: string, t: number, rawBody: string | Uint8Array): string =>
  createHmac('sha256', secret).update(`${t}.`).update(rawBody).digest('hex');

/**
 * Checks a `Sim-Signature` header against the raw body as received (before any JSON parsing). Several `v1` entries are
 * accepted (secret rotation); timestamps further than `toleranceS` from `nowS` either way are refused (replays of old
 * events, lying clocks). Every comparison is constant-time.
 */
export function verifySimulatorSignature(
  secret: string,
  header: string | undefined | null,
  rawBody: string | Uint8Array,
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

/**
 * A webhook as the simulator sends it (src/simulator/webhooks.ts, snake_case). `metadata` is echoed from the create call when the
 * adapter sent it: it names our payment exactly, where `reference` (the order id) may be ambiguous.
 */
export const SimulatorWebhookEvent = z.object({
  id: z.string().min(1).max(255),
  type: z.enum(['payment.succeeded', 'payment.authorized', 'payment.voided', 'payment.failed', 'refund.succeeded']),
  created: z.number().int().nonnegative(),
  data: z.object({
    payment: ProviderPaymentWire.extend({
      id: z.string().min(1).max(255),
      created: z.number().int().nonnegative(),
      metadata: z.record(z.string(), z.string()).nullish(),
    }),
  }),
});
export type SimulatorWebhookEvent = z.infer<typeof SimulatorWebhookEvent>;

/** The simulator's event in the domain's {@link ProviderEvent}; metadata is kept so routing can refuse a foreign one. */
export function toProviderEvent(e: SimulatorWebhookEvent): ProviderEvent {
  const { metadata, ...payment } = e.data.payment;
  const named = metadata && Object.keys(metadata).length > 0 ? { metadata } : {};
  return { eventId: e.id, type: e.type, created: e.created, payment: toPayment({ ...payment, ...named }) };
}

const headerOf = (headers: WebhookHeaders, name: string): string | undefined => {
  const v = headers[name.toLowerCase()];
  return typeof v === 'string' ? v : undefined;
};

/** Verifies and parses the simulator's webhooks (`POST /webhooks/simulator`). */
export class SimulatorWebhookVerifier implements WebhookVerifier {
  readonly provider: string;
  readonly signatureHeader = SIMULATOR_SIGNATURE_HEADER;
  readonly #secret: string;
  readonly #toleranceS: number;

  constructor(options: { readonly secret: string; readonly toleranceS: number; readonly provider?: string }) {
    this.provider = options.provider ?? 'simulator';
    this.#secret = options.secret;
    this.#toleranceS = options.toleranceS;
  }

  verify(rawBody: string, headers: WebhookHeaders, nowS?: number): WebhookVerdict {
    const check = verifySimulatorSignature(
      this.#secret,
      headerOf(headers, SIMULATOR_SIGNATURE_HEADER),
      rawBody,
      this.#toleranceS,
      nowS,
    );
    if (!check.ok) return { kind: 'refused', reason: check.reason };
    let json: unknown;
    try {
      json = JSON.parse(rawBody);
    } catch {
      return { kind: 'invalid', message: 'The body is not valid JSON', issues: [] };
    }
    const parsed = SimulatorWebhookEvent.safeParse(json);
    if (!parsed.success) {
      return {
        kind: 'invalid',
        message: 'The event is invalid',
        issues: parsed.error.issues.map((i) => ({ path: i.path.join('.') || '(body)', message: i.message })),
      };
    }
    return { kind: 'event', event: toProviderEvent(parsed.data), eventType: parsed.data.type };
  }
}
