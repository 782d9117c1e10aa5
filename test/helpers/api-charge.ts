/**
 * `POST /v1/payments` to an API a test started itself (a configured stack, not a world), as an order service sends it:
 * the merchant's bearer token, the idempotency key, a card payment of 10.00 EUR for a fresh order unless `over` says
 * otherwise.
 */
import { randomUUID } from 'node:crypto';

export function postCharge(
  apiUrl: string | undefined,
  token: string | undefined,
  key: string,
  over: Record<string, unknown> = {},
): Promise<Response> {
  return fetch(`${apiUrl}/v1/payments`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'idempotency-key': key, 'content-type': 'application/json' },
    body: JSON.stringify({
      orderId: `order_${randomUUID()}`,
      amount: { value: 1_000, currency: 'EUR' },
      paymentMethod: 'pm_card_visa',
      ...over,
    }),
  });
}
