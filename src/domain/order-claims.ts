/**
 * Order claims (docs/operations.md#order-claims): what the order check (src/client/order-guard.ts) asks of the claim
 * table every API process shares, implemented by `OrderClaims` (src/db/order-claims.ts).
 */

/** Who holds an order's claim: `ours` when the asking key took it (new, its own again, or a stale one taken over). */
export interface OrderClaim {
  readonly paymentKey: string;
  /** PostgreSQL's text of `claimed_at` (full precision): what a take-over and a release compare. */
  readonly claimedAt: string;
  readonly ours: boolean;
}

/** The claim table's three writes. */
export interface OrderClaimStore {
  /** Claims the order unless another key's claim younger than `windowMs` holds it; undefined: ask again. */
  claim(merchantId: string, orderId: string, paymentKey: string, windowMs: number): Promise<OrderClaim | undefined>;
  /** Takes the order over from `from` if its claim is still exactly that one; undefined when another took it first. */
  takeOver(merchantId: string, orderId: string, paymentKey: string, from: OrderClaim): Promise<OrderClaim | undefined>;
  /** Gives the order up if `claim` still holds it. */
  release(merchantId: string, orderId: string, claim: OrderClaim): Promise<void>;
}
