-- A split payment's hold, and the capture or release that ends it, each in one statement (src/wallets/ledger.ts
-- `hold`, `capture`, `release`), as 0004 made the debit: they run in the payment's first workflow task, on its answer's
-- path, and each was five round trips (BEGIN, lock, read, write, COMMIT). The same decisions as the steps, the same
-- locking (the row lock first; every query with a snapshot of its own), writing through wallet_append_entry (0004).
--
-- Outcomes: held / insufficient_funds (nothing written: the wallet as it is) / settled, with `replayed`, the amount and
-- the wallet's balance, held and time after the deciding entry; or wallet_not_found, operation_conflict, hold_settled
-- (with the kind that settled it), currency_mismatch, hold_not_found (nothing written).

CREATE FUNCTION wallet_hold(
  p_merchant text, p_wallet text, p_payment_key text, p_amount bigint, p_currency text, p_hold_id text,
  OUT outcome text, OUT replayed boolean, OUT currency text, OUT balance bigint, OUT held bigint, OUT at timestamptz
) LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  w wallets%ROWTYPE;
  h wallet_entries%ROWTYPE;
  written record;
BEGIN
  replayed := false;
  SELECT * INTO w FROM wallets WHERE merchant_id = p_merchant AND wallet_id = p_wallet FOR UPDATE;
  IF NOT FOUND THEN
    outcome := 'wallet_not_found';
    RETURN;
  END IF;
  currency := w.currency;
  SELECT * INTO h FROM wallet_entries WHERE merchant_id = p_merchant AND operation_id = p_hold_id;
  IF FOUND THEN
    IF h.wallet_id <> p_wallet OR h.amount <> p_amount THEN
      outcome := 'operation_conflict';
    ELSE
      SELECT 'held', true, h.balance_after, h.held_after, h.at INTO outcome, replayed, balance, held, at;
    END IF;
    RETURN;
  END IF;
  IF EXISTS (SELECT 1 FROM wallet_entries
              WHERE merchant_id = p_merchant AND hold_id = p_hold_id AND kind = 'release') THEN
    outcome := 'hold_settled';
    RETURN;
  END IF;
  IF w.currency <> p_currency THEN
    outcome := 'currency_mismatch';
    RETURN;
  END IF;
  IF w.balance - w.held < p_amount THEN
    SELECT 'insufficient_funds', w.balance, w.held, w.updated_at INTO outcome, balance, held, at;
    RETURN;
  END IF;
  SELECT * INTO written FROM wallet_append_entry(p_merchant, p_wallet, p_hold_id, 'hold', p_amount, 0, p_amount,
                                                  NULL, p_payment_key, NULL);
  SELECT 'held', written.balance_after, written.held_after, written.at INTO outcome, balance, held, at;
END;
$$;

-- p_kind: 'capture' or 'release'; p_own_id its operation id.
CREATE FUNCTION wallet_settle(
  p_merchant text, p_wallet text, p_payment_key text, p_kind text, p_hold_id text, p_own_id text,
  OUT outcome text, OUT replayed boolean, OUT amount bigint, OUT currency text, OUT balance bigint, OUT held bigint,
  OUT at timestamptz, OUT settled_by text
) LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  w wallets%ROWTYPE;
  h wallet_entries%ROWTYPE;
  e wallet_entries%ROWTYPE;
  written record;
BEGIN
  replayed := false;
  SELECT * INTO w FROM wallets WHERE merchant_id = p_merchant AND wallet_id = p_wallet FOR UPDATE;
  IF NOT FOUND THEN
    outcome := 'wallet_not_found';
    RETURN;
  END IF;
  currency := w.currency;
  SELECT * INTO e FROM wallet_entries WHERE merchant_id = p_merchant AND operation_id = p_own_id;
  IF FOUND THEN
    SELECT 'settled', true, e.amount, e.balance_after, e.held_after, e.at INTO outcome, replayed, amount, balance, held, at;
    RETURN;
  END IF;
  SELECT * INTO e FROM wallet_entries
   WHERE merchant_id = p_merchant AND hold_id = p_hold_id AND kind IN ('capture', 'release') ORDER BY seq LIMIT 1;
  IF FOUND THEN
    outcome := 'hold_settled';
    settled_by := e.kind;
    RETURN;
  END IF;
  SELECT * INTO h FROM wallet_entries WHERE merchant_id = p_merchant AND operation_id = p_hold_id;
  IF FOUND AND h.wallet_id <> p_wallet THEN
    outcome := 'operation_conflict';
    RETURN;
  END IF;
  IF h.seq IS NULL AND p_kind = 'capture' THEN
    outcome := 'hold_not_found';
    RETURN;
  END IF;
  amount := COALESCE(h.amount, 0);
  SELECT * INTO written FROM wallet_append_entry(p_merchant, p_wallet, p_own_id, p_kind, amount,
                                                  CASE WHEN p_kind = 'capture' THEN -amount ELSE 0 END, -amount,
                                                  p_hold_id, p_payment_key, NULL);
  SELECT 'settled', written.balance_after, written.held_after, written.at INTO outcome, balance, held, at;
END;
$$;
