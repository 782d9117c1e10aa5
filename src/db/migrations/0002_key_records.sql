-- Key records: a key's first terminal answer, kept for KEY_RETENTION_DAYS whatever the Temporal namespace retention
-- (docs/operations.md#key-records). The workflow id stays the in-flight barrier; the record answers once the workflow
-- is gone. Rows are pruned after `expires_at`.

CREATE TABLE key_records (
  -- `<operation>:<merchantId>:<key>`, as the workflow id of the same intent.
  scope       text PRIMARY KEY,
  merchant_id text NOT NULL,
  operation   text NOT NULL,
  fingerprint text NOT NULL,
  -- The answer's body as the API sent it (a PaymentView: no card or customer data).
  view        jsonb NOT NULL,
  recorded_at timestamptz NOT NULL DEFAULT now(),
  expires_at  timestamptz NOT NULL,
  CONSTRAINT key_records_expiry_after_record CHECK (expires_at > recorded_at)
);

CREATE INDEX key_records_expiry ON key_records (expires_at);
