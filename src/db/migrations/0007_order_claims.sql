-- Order claims: the serialization point of one open payment per order (ORDER_SINGLE_FLIGHT) across API processes
-- (src/client/order-guard.ts). Temporal visibility says which payments of an order are open, but only once a start is
-- indexed: two keys for one order at the same instant on two API processes both passed it and both charged. A new key
-- claims its order here before its visibility check and its start; another key holding a fresh claim is asked whether
-- its payment is open (or still being started). A claim older than the start window no longer holds anything:
-- visibility decides. Rows are pruned after an hour (docs/operations.md#order-claims).

CREATE TABLE order_claims (
  merchant_id text NOT NULL,
  -- The order service's own order id (also the payment's `OrderId` search attribute).
  order_id    text NOT NULL,
  -- The idempotency key of the payment being started for the order.
  payment_key text NOT NULL,
  claimed_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (merchant_id, order_id)
);

CREATE INDEX order_claims_claimed_at ON order_claims (claimed_at);
