-- Payment files and their transactions in the generic batch commit
-- (storage.PayoutWrites, kind "payout").
--
-- Rows: {"files": [...headers...], "txns": [...the changed transactions...]}. A
-- file's header is one version-checked row (prev 0 inserts; otherwise updated only
-- if still at prev, PS002 if not); its transactions are rows of their own, upserted
-- by primary key, so a rail result for 500 of a file's 10,000 transactions writes
-- 500 rows.

CREATE OR REPLACE FUNCTION paysvc_apply_payout(p_rows jsonb, p_at timestamptz) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    n bigint;
    f record;
BEGIN
    FOR f IN SELECT * FROM jsonb_to_recordset(p_rows->'files') AS x(file_id text, merchant_id text, tracking_id uuid, status text,
                 version bigint, prev bigint, data jsonb, created_at timestamptz, updated_at timestamptz) LOOP
        IF f.prev = 0 THEN
            INSERT INTO payout_files (file_id, merchant_id, tracking_id, status, version, data, created_at, updated_at)
            VALUES (f.file_id, f.merchant_id, f.tracking_id, f.status, f.version, f.data, f.created_at, f.updated_at);
        ELSE
            UPDATE payout_files SET status = f.status, version = f.version, data = f.data, updated_at = f.updated_at
             WHERE file_id = f.file_id AND version = f.prev;
            GET DIAGNOSTICS n = ROW_COUNT;
            IF n <> 1 THEN
                RAISE EXCEPTION 'stale payment file snapshot: % is not at version %', f.file_id, f.prev USING ERRCODE = 'PS002';
            END IF;
        END IF;
    END LOOP;

    -- Upserts by primary key: always an index probe per row, whatever the table size.
    IF jsonb_array_length(coalesce(p_rows->'txns', '[]')) > 0 THEN
        INSERT INTO payout_transactions (transaction_id, file_id, merchant_id, seq, status, provider, account,
                                         idempotency_key, claims_key, data, created_at, updated_at)
        SELECT transaction_id, file_id, merchant_id, seq, status, provider, account, NULLIF(idempotency_key, ''),
               claims_key, data, created_at, updated_at
          FROM jsonb_to_recordset(p_rows->'txns') AS x(transaction_id text, file_id text, merchant_id text, seq integer,
               status text, provider text, account text, idempotency_key text, claims_key boolean, data jsonb,
               created_at timestamptz, updated_at timestamptz)
        ON CONFLICT (transaction_id) DO UPDATE
           SET status = EXCLUDED.status, claims_key = EXCLUDED.claims_key, data = EXCLUDED.data, updated_at = EXCLUDED.updated_at
         WHERE payout_transactions.file_id = EXCLUDED.file_id;
    END IF;
END
$$;
