/**
 * One delivery attempt: POST the event's exact body to the merchant's endpoint, signed at the moment of sending, within
 * one bound from connect to the last byte of the answer. No redirects are followed (a 3xx is a failed attempt: the
 * merchant fixes its URL), no retry here: the event's schedule is the only retry layer.
 */
import { signEvent, signatureHeader } from './signature';

/** How an attempt went. */
export type AttemptResult =
  | { readonly kind: 'delivered'; readonly status: number }
  /** The endpoint answered, not 2xx (`retryAfterMs`: its Retry-After, when it gave one). */
  | { readonly kind: 'refused'; readonly status: number; readonly retryAfterMs?: number }
  /** No answer: refused, reset, DNS, TLS, or the bound passed (`timeout`). */
  | { readonly kind: 'unreachable'; readonly error: string };

/** What the endpoint is sent besides the body. */
export const userAgent = 'payment-workflows-webhooks/1';

/** Sends `body` to `url` signed with `secret` at `nowS`; never throws. */
export async function postEvent(
  url: string,
  secret: string,
  body: string,
  eventId: string,
  timeoutMs: number,
  nowS: number = Math.floor(Date.now() / 1000),
): Promise<AttemptResult> {
  try {
    const res = await fetch(url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'user-agent': userAgent,
        [signatureHeader]: signEvent(secret, body, nowS),
        'payments-event-id': eventId,
      },
      body,
      redirect: 'manual',
      signal: AbortSignal.timeout(timeoutMs),
    });
    // The answer's body is not used, only read to the end (within the same bound) so the connection can be reused.
    await res.arrayBuffer().catch(() => undefined);
    if (res.status >= 200 && res.status < 300) return { kind: 'delivered', status: res.status };
    const retryAfterMs = retryAfterOf(res.headers.get('retry-after'));
    return { kind: 'refused', status: res.status, ...(retryAfterMs === undefined ? {} : { retryAfterMs }) };
  } catch (err) {
    return { kind: 'unreachable', error: reasonOf(err) };
  }
}

/** Retry-After in seconds or as an HTTP date, in ms from now; undefined when absent or unreadable. */
function retryAfterOf(value: string | null): number | undefined {
  if (value === null) return undefined;
  if (/^\d+$/.test(value.trim())) return Number(value.trim()) * 1000;
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, at - Date.now());
}

/** A word for why no answer came (`timeout`, `ECONNREFUSED`, ...): never the URL, which may carry a token. */
function reasonOf(err: unknown): string {
  const e = err as { name?: unknown; cause?: { code?: unknown; name?: unknown } } | null;
  if (e?.name === 'TimeoutError' || e?.name === 'AbortError') return 'timeout';
  const code = e?.cause?.code ?? e?.cause?.name;
  return typeof code === 'string' ? code : 'network_error';
}
