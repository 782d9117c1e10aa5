-- Webhooks to the merchant (docs/operations.md#webhooks-to-merchants): each merchant's endpoint, the events its
-- payments announced (the delivery queue, one row per event, kept after delivery for redelivery and audit), and one
-- wake flag per merchant so that a burst of events wakes its delivery workflow once, not once per event.

CREATE TABLE merchant_webhook_endpoints (
  merchant_id text PRIMARY KEY,
  url         text NOT NULL,
  -- The HMAC key of `Payments-Signature` (`whsec_...`); replaced on every PUT.
  secret      text NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now(),
  updated_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE merchant_webhook_events (
  -- `evt_...`: the event's id, the same on every delivery (the payment made it once, deterministically).
  id              text PRIMARY KEY,
  merchant_id     text NOT NULL,
  payment_key     text NOT NULL,
  type            text NOT NULL,
  -- The exact body every delivery sends (text, not jsonb: the bytes stay the same from one delivery to the next).
  body            text NOT NULL,
  -- When the payment announced it: the delivery lag counts from here.
  created_at      timestamptz NOT NULL,
  -- When it was queued (or queued again by a redelivery): the retry window counts from here.
  queued_at       timestamptz NOT NULL DEFAULT now(),
  status          text NOT NULL DEFAULT 'pending',
  attempts        integer NOT NULL DEFAULT 0,
  next_attempt_at timestamptz NOT NULL,
  -- A delivery round has it until then (a round whose worker died leaves it to the next once this passed).
  leased_until    timestamptz,
  last_attempt_at timestamptz,
  -- The HTTP status of the last attempt, or null when it got none (refused, reset, timed out).
  last_status     integer,
  last_error      text,
  delivered_at    timestamptz,
  CONSTRAINT merchant_webhook_events_status CHECK (status IN ('pending', 'delivered', 'failed', 'discarded')),
  CONSTRAINT merchant_webhook_events_attempts CHECK (attempts >= 0)
);

-- The delivery rounds' claim: a merchant's pending events by due time.
CREATE INDEX merchant_webhook_events_due ON merchant_webhook_events (merchant_id, next_attempt_at)
  WHERE status = 'pending';
-- The backlog metrics and the pruning of settled events.
CREATE INDEX merchant_webhook_events_pending ON merchant_webhook_events (created_at) WHERE status = 'pending';
CREATE INDEX merchant_webhook_events_settled ON merchant_webhook_events (queued_at) WHERE status <> 'pending';
CREATE INDEX merchant_webhook_events_payment ON merchant_webhook_events (merchant_id, payment_key);

CREATE TABLE merchant_webhook_wakes (
  merchant_id text PRIMARY KEY,
  -- Set by the event that found it unset (and woke the delivery workflow), cleared when a round starts.
  pending     boolean NOT NULL
);
