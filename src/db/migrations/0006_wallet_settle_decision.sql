-- wallet_settle (0005) says more about the entry that decided it, so a wallet-only payment whose own debit stayed
-- unknown answers what the API answered (src/workflows/wallet-part.ts `settleUnknownDebit`): a release that replays
-- its own entry gives that entry's `reason` (`insufficient_funds`: the key's debit was declined for short funds and the
-- decline recorded, not a release of an unknown debit), and a refusal because the hold was settled gives when (`at`:
-- the capture's time, the debit's decision). The decisions themselves are 0005's. Its OUT columns change, so it is
-- dropped and created again (one transaction with the other pending migrations: no moment without it).

DROP FUNCTION wallet_settle(text, text, text, text, text, text);

-- p_kind: 'capture' or 'release'; p_own_id its operation id.
CREATE FUNCTION wallet_settle(
  p_merchant text, p_wallet text, p_payment_key text, p_kind text, p_hold_id text, p_own_id text,
  OUT outcome text, OUT replayed boolean, OUT amount bigint, OUT currency text, OUT balance bigint, OUT held bigint,
  OUT at timestamptz, OUT settled_by text, OUT reason text
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
    SELECT 'settled', true, e.amount, e.balance_after, e.held_after, e.at, e.reason
      INTO outcome, replayed, amount, balance, held, at, reason;
    RETURN;
  END IF;
  SELECT * INTO e FROM wallet_entries
   WHERE merchant_id = p_merchant AND hold_id = p_hold_id AND kind IN ('capture', 'release') ORDER BY seq LIMIT 1;
  IF FOUND THEN
    outcome := 'hold_settled';
    settled_by := e.kind;
    at := e.at;
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
