/**
 * `/v1/webhook-endpoint` (docs/http-api.md, "Webhooks to your endpoint"): the merchant's endpoint for the events of its payments, as the API takes
 * and answers it; and what a private address is, for deployments that refuse to post to their own network.
 */
import { z } from 'zod';

/** The longest endpoint URL accepted. */
export const maxEndpointUrlLength = 2_048;

/** An endpoint URL: http or https, absolute, with a host; no credentials in it (they would be logged and stored). */
export const EndpointUrl = z
  .url({ protocol: /^https?$/, message: 'url must be an absolute http or https URL' })
  .max(maxEndpointUrlLength, { message: `url must be at most ${maxEndpointUrlLength} characters` })
  .refine((u) => !URL.canParse(u) || (new URL(u).username === '' && new URL(u).password === ''), {
    message: 'url must not carry a user name or password',
  })
  .describe('Where the events are POSTed: an absolute http or https URL.');

/** `PUT /v1/webhook-endpoint`. */
export const WebhookEndpointRequest = z.strictObject({ url: EndpointUrl });
export type WebhookEndpointRequest = z.infer<typeof WebhookEndpointRequest>;

/** `GET /v1/webhook-endpoint`: the URL only, never the secret. */
export const WebhookEndpointView = z.object({ url: z.string() });
export type WebhookEndpointView = z.infer<typeof WebhookEndpointView>;

/** `PUT`'s answer: the URL and its new signing secret (shown once, on this answer only). */
export const WebhookEndpointCreated = z.object({
  url: z.string(),
  secret: z
    .string()
    .describe(
      'The new signing secret (`whsec_...`): every event is signed with it from now on (the previous one is void).',
    ),
});
export type WebhookEndpointCreated = z.infer<typeof WebhookEndpointCreated>;

const privateV4 = [
  /^0\./,
  /^10\./,
  /^127\./,
  /^169\.254\./,
  /^172\.(1[6-9]|2\d|3[01])\./,
  /^192\.168\./,
  /^100\.(6[4-9]|[7-9]\d|1[01]\d|12[0-7])\./,
];

/**
 * Whether a URL's host names this machine or a private network by itself (loopback, RFC 1918, link-local with the
 * cloud metadata address, carrier-grade NAT, unique-local IPv6, `localhost`). A name that resolves there is not
 * caught: this refuses the obvious request forgery at the API, the network's egress policy does the rest.
 */
export function isPrivateHost(url: string): boolean {
  const host = new URL(url).hostname.toLowerCase().replace(/^\[|\]$/g, '');
  if (host === 'localhost' || host.endsWith('.localhost')) return true;
  if (/^\d+\.\d+\.\d+\.\d+$/.test(host)) return privateV4.some((r) => r.test(host));
  if (!host.includes(':')) return false;
  // An IPv4-mapped address (the URL parser writes `::ffff:7f00:1` for `::ffff:127.0.0.1`).
  const mapped = /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(host);
  if (mapped?.[1] !== undefined && mapped[2] !== undefined) {
    const [hi, lo] = [parseInt(mapped[1], 16), parseInt(mapped[2], 16)];
    const v4 = `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
    return privateV4.some((r) => r.test(v4));
  }
  return host === '::1' || host === '::' || /^f[cd]/.test(host) || /^fe[89ab]/.test(host);
}
