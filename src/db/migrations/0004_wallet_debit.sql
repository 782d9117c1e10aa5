-- A wallet-only payment's debit in one statement (src/wallets/ledger.ts `debit`): the same decision the ledger's
-- steps make (lock the wallet row, read the payment's entries under that lock, write), in one round trip instead of six.
-- The API answers a wallet-only payment from this debit, so its round trips are on the answer's path.
--
-- Every query below runs with a snapshot of its own (the function is VOLATILE, the transaction READ COMMITTED): the
-- entries are read after the lock and see what the step that held the lock before committed, as the ledger's separate
-- statements do. Processes that still debit statement by statement lock the same row and read the same entries: both
-- kinds decide each payment key once, together.
--
-- Outcomes (what the ledger turns into its answer or refusal): captured / insufficient_funds (with `replayed`, and the
-- deciding entry's balance, held and time), or wallet_not_found, operation_conflict, hold_settled, currency_mismatch
-- (nothing written).

-- One entry and the wallet together, as appendEntry (src/wallets/steps.ts) writes them: the wallet's CHECK constraints
-- are the last word.
CREATE FUNCTION wallet_append_entry(
  p_merchant text, p_wallet text, p_operation text, p_kind text, p_amount bigint, p_balance_delta bigint,
  p_held_delta bigint, p_hold_id text, p_payment_key text, p_reason text,
  OUT balance_after bigint, OUT held_after bigint, OUT at timestamptz
) LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  UPDATE wallets SET balance = balance + p_balance_delta, held = held + p_held_delta, updated_at = now()
   WHERE merchant_id = p_merchant AND wallet_id = p_wallet
  RETURNING balance, held INTO balance_after, held_after;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'wallet_append_entry: wallet vanished under its lock';
  END IF;
  INSERT INTO wallet_entries (merchant_id, wallet_id, operation_id, kind, amount, hold_id, payment_key, reason,
                              balance_after, held_after)
  VALUES (p_merchant, p_wallet, p_operation, p_kind, p_amount, p_hold_id, p_payment_key, p_reason,
          balance_after, held_after)
  RETURNING wallet_entries.at INTO at;
END;
$$;

CREATE FUNCTION wallet_debit(
  p_merchant text, p_wallet text, p_payment_key text, p_amount bigint, p_currency text,
  p_hold_id text, p_capture_id text, p_release_id text, p_declined_reason text,
  OUT outcome text, OUT replayed boolean, OUT currency text, OUT balance bigint, OUT held bigint, OUT at timestamptz
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
  SELECT * INTO h FROM wallet_entries WHERE merchant_id = p_merchant AND operation_id = p_hold_id;
  IF FOUND AND (h.wallet_id <> p_wallet OR h.amount <> p_amount) THEN
    outcome := 'operation_conflict';
    RETURN;
  END IF;
  SELECT * INTO e FROM wallet_entries WHERE merchant_id = p_merchant AND operation_id = p_capture_id;
  IF FOUND THEN
    SELECT 'captured', true, e.balance_after, e.held_after, e.at INTO outcome, replayed, balance, held, at;
    RETURN;
  END IF;
  SELECT * INTO e FROM wallet_entries
   WHERE merchant_id = p_merchant AND hold_id = p_hold_id AND kind = 'release' ORDER BY seq LIMIT 1;
  IF FOUND THEN
    IF h.seq IS NULL AND e.reason = p_declined_reason AND e.wallet_id = p_wallet THEN
      SELECT 'insufficient_funds', true, e.balance_after, e.held_after, e.at INTO outcome, replayed, balance, held, at;
    ELSE
      outcome := 'hold_settled';
    END IF;
    RETURN;
  END IF;
  IF h.seq IS NULL THEN
    IF w.currency <> p_currency THEN
      outcome := 'currency_mismatch';
      RETURN;
    END IF;
    IF w.balance - w.held < p_amount THEN
      -- Short funds, recorded: a later debit of this key answers the same decline.
      SELECT * INTO written FROM wallet_append_entry(p_merchant, p_wallet, p_release_id, 'release', 0, 0, 0,
                                                      p_hold_id, p_payment_key, p_declined_reason);
      SELECT 'insufficient_funds', written.balance_after, written.held_after, written.at
        INTO outcome, balance, held, at;
      RETURN;
    END IF;
    PERFORM wallet_append_entry(p_merchant, p_wallet, p_hold_id, 'hold', p_amount, 0, p_amount, NULL, p_payment_key,
                                NULL);
  END IF;
  SELECT * INTO written FROM wallet_append_entry(p_merchant, p_wallet, p_capture_id, 'capture', p_amount, -p_amount,
                                                  -p_amount, p_hold_id, p_payment_key, NULL);
  SELECT 'captured', written.balance_after, written.held_after, written.at INTO outcome, balance, held, at;
END;
$$;
