-- Wallets and their append-only entries (docs/architecture.md#where-balances-live).
-- A wallet row is the lock every step of that wallet takes (SELECT ... FOR UPDATE); the CHECK constraints are the last
-- word on what no code path may ever write: a negative availability, a balance JavaScript cannot count exactly.

CREATE TABLE wallets (
  merchant_id text NOT NULL,
  wallet_id   text NOT NULL,
  currency    char(3) NOT NULL,
  balance     bigint NOT NULL DEFAULT 0,
  held        bigint NOT NULL DEFAULT 0,
  created_at  timestamptz NOT NULL DEFAULT now(),
  updated_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (merchant_id, wallet_id),
  CONSTRAINT wallets_held_not_negative CHECK (held >= 0),
  CONSTRAINT wallets_available_not_negative CHECK (balance - held >= 0),
  CONSTRAINT wallets_balance_exact CHECK (balance <= 9007199254740991)
);

CREATE TABLE wallet_entries (
  seq          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  merchant_id  text NOT NULL,
  wallet_id    text NOT NULL,
  -- `<kind>:<merchant>:<key>`: the idempotency key of the step (src/domain/wallet-operations.ts).
  operation_id text NOT NULL,
  kind         text NOT NULL CHECK (kind IN ('credit', 'hold', 'capture', 'release', 'refund')),
  amount       bigint NOT NULL,
  -- capture, release, refund: the operation id of the hold they settle.
  hold_id      text,
  payment_key  text,
  reason       text,
  -- credit: the request's fingerprint, so a repeat of its key with another body is refused.
  fingerprint  text,
  -- The wallet after this entry: a replay answers what the first call answered; an audit reads the history.
  balance_after bigint NOT NULL,
  held_after    bigint NOT NULL,
  at           timestamptz NOT NULL DEFAULT now(),
  FOREIGN KEY (merchant_id, wallet_id) REFERENCES wallets (merchant_id, wallet_id),
  -- Stronger than UNIQUE (merchant, wallet, operation): an operation id names one step across the merchant's wallets,
  -- so a credit key reused on another wallet is refused too.
  CONSTRAINT wallet_entries_operation_once UNIQUE (merchant_id, operation_id),
  -- A release of a hold that never applied records 0: it bars a late hold under that id.
  CONSTRAINT wallet_entries_amount CHECK (amount > 0 OR (kind = 'release' AND amount = 0)),
  CONSTRAINT wallet_entries_hold_link CHECK ((kind IN ('capture', 'release', 'refund')) = (hold_id IS NOT NULL))
);

-- A hold ends once: captured or released, never both, never twice.
CREATE UNIQUE INDEX wallet_entries_hold_settled_once ON wallet_entries (merchant_id, hold_id)
  WHERE kind IN ('capture', 'release');
-- A hold's settlement and refunds, read under the wallet's lock.
CREATE INDEX wallet_entries_by_hold ON wallet_entries (merchant_id, hold_id) WHERE hold_id IS NOT NULL;
-- The entries list, oldest first, page by page.
CREATE INDEX wallet_entries_by_wallet ON wallet_entries (merchant_id, wallet_id, seq);

-- Append-only: an entry is never changed nor removed (a correction is a new entry).
CREATE FUNCTION wallet_entries_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'wallet_entries is append-only (% refused)', TG_OP USING ERRCODE = 'restrict_violation';
END;
$$;
CREATE TRIGGER wallet_entries_append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON wallet_entries
  FOR EACH STATEMENT EXECUTE FUNCTION wallet_entries_append_only();
