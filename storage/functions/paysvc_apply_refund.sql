-- Refund books and their refunds in the generic batch commit (actors/refund,
-- kind "refund"). An instance is an invoice's refund book; each refund is also a
-- row of its own, for the API's reads.
--
-- Rows: [{"id": invoice_id, "merchant_id", "prev", "version", "state": {...book...,
-- "refunds": [...]}}]. The book's version guards every refund of it (PS002 if the
-- book is not at prev); refunds are upserted by id (at most refund.MaxPerInvoice a
-- book), and a refund of another merchant is never overwritten.

CREATE OR REPLACE FUNCTION paysvc_apply_refund(p_rows jsonb, p_at timestamptz) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    n bigint;
    r record;
BEGIN
    FOR r IN SELECT * FROM jsonb_to_recordset(p_rows) AS x(id text, merchant_id text, prev bigint, version bigint, state jsonb) LOOP
        IF r.prev = 0 THEN
            INSERT INTO refund_books (invoice_id, merchant_id, version, data, created_at, updated_at)
            VALUES (r.id, r.merchant_id, r.version, r.state - 'refunds', p_at, p_at);
        ELSE
            UPDATE refund_books SET version = r.version, data = r.state - 'refunds', updated_at = p_at
             WHERE invoice_id = r.id AND merchant_id = r.merchant_id AND version = r.prev;
            GET DIAGNOSTICS n = ROW_COUNT;
            IF n <> 1 THEN
                RAISE EXCEPTION 'stale refund book snapshot: % is not at version %', r.id, r.prev USING ERRCODE = 'PS002';
            END IF;
        END IF;
        INSERT INTO refunds (id, merchant_id, invoice_id, status, data, created_at, updated_at)
        SELECT (x->>'id')::bigint, r.merchant_id, r.id, x->>'status', x, (x->>'created_at')::timestamptz, (x->>'updated_at')::timestamptz
          FROM jsonb_array_elements(coalesce(r.state->'refunds', '[]')) AS x
        ON CONFLICT (id) DO UPDATE SET status = EXCLUDED.status, data = EXCLUDED.data, updated_at = EXCLUDED.updated_at
         WHERE refunds.merchant_id = EXCLUDED.merchant_id AND refunds.data IS DISTINCT FROM EXCLUDED.data;
    END LOOP;
END
$$;
