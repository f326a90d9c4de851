-- Before this migration, approving a payment file did not write its transactions'
-- rows, so a transaction that held its idempotency_key since approval showed
-- claims_key = false until its rail reported on it, and a second file with the same
-- key could be paid meanwhile. The engine now writes those rows at approval; this
-- sets the flag on rows written before, by the same rule as storage.ClaimsKey: the
-- file approved (PROCESSING or COMPLETE), the transaction not FAILED, a key present.
UPDATE payout_transactions t SET claims_key = true
    FROM payout_files f
    WHERE t.file_id = f.file_id AND f.status IN ('PROCESSING', 'COMPLETE')
      AND t.idempotency_key IS NOT NULL AND t.status <> 'FAILED' AND NOT t.claims_key;
