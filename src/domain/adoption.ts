/**
 * Which provider payment is whose (docs/architecture.md#identity-and-key-scopes). All merchants share one provider account, so
 * a search by reference (and a webhook without our metadata) sees every merchant's payments. A provider payment is
 * adopted only when its metadata names this merchant and key, or, for a provider without metadata support (a payment
 * with no metadata at all), when it is the one candidate that matches every field. Anything else stays unknown and
 * goes to an operator. Pure rules, shared by the lookups (activities), the webhook router (client), the sweep and the
 * charge workflow.
 */
import { providerAmountOf } from './wallet-operations';
import type { ProviderPayment } from './definitions';
import type { PaymentView } from './payment';

/** The metadata names the charge workflow sends on create (`paymentMetadata`) and the provider echoes. */
export const ownerMetadataKeys = { merchantId: 'merchant_id', key: 'payment_key' } as const;

/** Our payment a provider payment may belong to: the charge's scope. */
export interface PaymentOwner {
  readonly merchantId: string;
  readonly key: string;
}

/**
 * What a payment's metadata says about an owner: `ours` names exactly this merchant and key, `silent` is no metadata at
 * all (a provider without metadata support), `foreign` is anything else (another merchant, another key, another
 * integration's tags): a `foreign` payment is never adopted.
 */
export type MetadataVerdict = 'ours' | 'foreign' | 'silent';

/** Judges a payment's metadata against one owner. */
export function metadataVerdict(
  metadata: Readonly<Record<string, string>> | undefined,
  owner: PaymentOwner,
): MetadataVerdict {
  if (metadata === undefined || Object.keys(metadata).length === 0) return 'silent';
  return metadata[ownerMetadataKeys.merchantId] === owner.merchantId && metadata[ownerMetadataKeys.key] === owner.key
    ? 'ours'
    : 'foreign';
}

/** A payment as the provider reports it: the fields adoption reads. */
export type AdoptionCandidate = Pick<ProviderPayment, 'amount' | 'currency' | 'reference' | 'created' | 'metadata'>;

/** Every field a payment without metadata must match to be taken for our charge. */
export interface ChargeFacts {
  readonly amount: number;
  readonly currency: string;
  readonly reference: string;
  /** Epoch ms of our first send (or earlier): a payment created before it is not ours. Absent: not checked. */
  readonly notBeforeMs?: number;
}

/** How far the provider's clock may lag ours when `created` is compared with a lower bound. */
export const defaultClockSkewToleranceMs = 60_000;

/** Whether a provider payment matches every field of our charge (`created` is unix seconds on the provider's clock). */
export function matchesCharge(p: AdoptionCandidate, facts: ChargeFacts, skewMs = defaultClockSkewToleranceMs): boolean {
  return (
    p.amount === facts.amount &&
    p.currency === facts.currency &&
    p.reference === facts.reference &&
    (facts.notBeforeMs === undefined || p.created * 1000 >= facts.notBeforeMs - skewMs)
  );
}

/** The verdict on a search's candidates for one charge. */
export type Adoption<P> =
  | { readonly kind: 'adopt'; readonly payment: P; readonly by: 'key' | 'metadata' | 'fields' }
  | { readonly kind: 'none' }
  /** Several could be ours: nothing is adopted, the charge stays unknown and ends with an operator. */
  | { readonly kind: 'ambiguous'; readonly count: number };

/**
 * Of the provider payments a search by reference found, the one that is `owner`'s charge: the one whose metadata names
 * the owner; else, among payments without any metadata, the only one matching every field of `facts`. A payment whose
 * metadata names anyone else is never a candidate; two candidates are never guessed between.
 */
export function adoptCandidate<P extends AdoptionCandidate>(
  candidates: readonly P[],
  owner: PaymentOwner,
  facts: ChargeFacts,
  skewMs = defaultClockSkewToleranceMs,
): Adoption<P> {
  const named = candidates.filter((p) => metadataVerdict(p.metadata, owner) === 'ours');
  const [one] = named;
  if (named.length === 1 && one) return { kind: 'adopt', payment: one, by: 'metadata' };
  // Two payments carrying our own key: a double charge, which an operator has to see, not a winner we pick.
  if (named.length > 1) return { kind: 'ambiguous', count: named.length };
  const matching = candidates.filter(
    (p) => metadataVerdict(p.metadata, owner) === 'silent' && matchesCharge(p, facts, skewMs),
  );
  const [only] = matching;
  if (matching.length === 1 && only) return { kind: 'adopt', payment: only, by: 'fields' };
  return matching.length === 0 ? { kind: 'none' } : { kind: 'ambiguous', count: matching.length };
}

/** What routing and the sweep know of one payment of ours. */
export type OurPaymentFacts = Pick<
  PaymentView,
  'merchantId' | 'key' | 'orderId' | 'amount' | 'createdAt' | 'providerPaymentId' | 'wallet'
>;

/** Where a provider payment belongs among payments of ours found by its reference. */
export type Attribution<C> =
  | { readonly kind: 'owner'; readonly candidate: C; readonly by: 'metadata' | 'provider_id' | 'fields' }
  | { readonly kind: 'unmatched' }
  | { readonly kind: 'ambiguous'; readonly count: number };

/**
 * The reverse of {@link adoptCandidate}: which of our payments (found by reference, across all merchants) owns a
 * provider payment. With metadata: only the payment it names. Without: the one that records this provider payment,
 * else the only one still waiting for its provider payment whose every field matches. Never "the only candidate".
 */
export function attributeProviderPayment<C extends { readonly view: OurPaymentFacts }>(
  payment: AdoptionCandidate & Pick<ProviderPayment, 'id'>,
  candidates: readonly C[],
  skewMs = defaultClockSkewToleranceMs,
): Attribution<C> {
  const verdictOf = (c: C) => metadataVerdict(payment.metadata, { merchantId: c.view.merchantId, key: c.view.key });
  const pick = (found: C[], by: 'metadata' | 'provider_id' | 'fields'): Attribution<C> | undefined => {
    const [one] = found;
    if (found.length === 1 && one) return { kind: 'owner', candidate: one, by };
    return found.length > 1 ? { kind: 'ambiguous', count: found.length } : undefined;
  };
  const silent = metadataVerdict(payment.metadata, { merchantId: '', key: '' }) === 'silent';
  if (!silent)
    return (
      pick(
        candidates.filter((c) => verdictOf(c) === 'ours'),
        'metadata',
      ) ?? { kind: 'unmatched' }
    );
  const recording = pick(
    candidates.filter((c) => c.view.providerPaymentId === payment.id),
    'provider_id',
  );
  if (recording) return recording;
  const waiting = candidates.filter(
    (c) => c.view.providerPaymentId === undefined && matchesCharge(payment, chargeFactsOf(c.view), skewMs),
  );
  return pick(waiting, 'fields') ?? { kind: 'unmatched' };
}

/** Our payment's fields as {@link ChargeFacts}; it was created (`createdAt`) before its first send. */
export function chargeFactsOf(view: Pick<OurPaymentFacts, 'orderId' | 'amount' | 'createdAt' | 'wallet'>): ChargeFacts {
  const createdMs = Date.parse(view.createdAt);
  return {
    // A wallet part is held apart: the provider was charged for the rest.
    amount: providerAmountOf(view),
    currency: view.amount.currency,
    reference: view.orderId,
    ...(Number.isNaN(createdMs) ? {} : { notBeforeMs: createdMs }),
  };
}
