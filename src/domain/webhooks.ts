/**
 * The webhook half of a provider plug-in: what the API's `POST /webhooks/:provider` dispatches to. An interface only
 * (its implementations live in each provider's folder under src/providers/), here in the domain so that the API and the
 * providers both depend on it and the API never imports a provider.
 */
import type { ProviderEvent } from './provider-payment';

/** The request headers a webhook arrived with (lower-case names, as Node gives them). */
export type WebhookHeaders = Readonly<Record<string, string | string[] | undefined>>;

/** What a provider's webhook verifier made of one delivery. */
export type WebhookVerdict =
  /** Signed by the provider and parsed: signal it. */
  | { readonly kind: 'event'; readonly event: ProviderEvent; readonly eventType: string }
  /** Signed, but of a type the payments do not act on (answered 2xx so the provider stops resending it). */
  | { readonly kind: 'ignored'; readonly eventType: string }
  /** Not verifiably from the provider (missing, malformed, stale or wrong signature): never applied. */
  | { readonly kind: 'refused'; readonly reason: string }
  /** Signed, but not an event we can read. */
  | {
      readonly kind: 'invalid';
      readonly message: string;
      readonly issues: readonly { readonly path: string; readonly message: string }[];
    };

/**
 * The webhook half of a provider plug-in: verifies a delivery on its raw body (before any parsing) with the provider's
 * own scheme and secret, and parses it into the domain's {@link ProviderEvent}. Pure apart from the clock: the API
 * holds one per provider and dispatches `POST /webhooks/:provider` to it.
 */
export interface WebhookVerifier {
  readonly provider: string;
  /** The header that carries the signature (for the API's documentation and logs). */
  readonly signatureHeader: string;
  verify(rawBody: string, headers: WebhookHeaders, nowS?: number): WebhookVerdict;
}
