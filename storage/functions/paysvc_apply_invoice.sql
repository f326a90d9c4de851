-- Invoices (collections) as jsonb rows of the generic batch commit: what an engine
-- of an earlier release sends (this release's engine sends invoices as the typed
-- arrays of paysvc_commit_batches_v3, which writes them the same way).
--
-- Rows: [{"invoice_id", "merchant_id", "state", "api_ref", "checkout_request_id",
-- "version", "prev", "data", "created_at", "updated_at"}]. A row is new (prev 0:
-- inserted; a taken id fails the primary key, 23505) or changed (updated only if
-- still at prev). The rows name each invoice once (storage.InvoiceWrites), so the
-- UPDATE's row count says whether every changed invoice was still at its version;
-- if not, the batch is stale (PS002) and rolls back whole.
--
-- SET enable_seqscan = off: the UPDATE joins the rows to invoices, and a plan cached
-- while the table was small would scan the whole table on every call as it grows.

CREATE OR REPLACE FUNCTION paysvc_apply_invoice(p_rows jsonb, p_at timestamptz) RETURNS void LANGUAGE plpgsql
SET enable_seqscan = off AS $$
DECLARE
    n_want bigint;
    n_done bigint;
BEGIN
    WITH x AS MATERIALIZED (
        SELECT * FROM jsonb_to_recordset(p_rows) AS x(invoice_id text, merchant_id text, state text, api_ref text,
               checkout_request_id text, version bigint, prev bigint, data jsonb, created_at timestamptz, updated_at timestamptz)
    ), ins AS (
        INSERT INTO invoices (invoice_id, merchant_id, state, api_ref, checkout_request_id, version, data, created_at, updated_at)
        SELECT x.invoice_id, x.merchant_id, x.state, NULLIF(x.api_ref, ''), NULLIF(x.checkout_request_id, ''), x.version,
               x.data, x.created_at, x.updated_at
          FROM x
         WHERE x.prev = 0
    ), upd AS (
        UPDATE invoices i
           SET state = x.state, checkout_request_id = NULLIF(x.checkout_request_id, ''), version = x.version,
               data = x.data, updated_at = x.updated_at
          FROM x
         WHERE x.prev <> 0 AND i.invoice_id = x.invoice_id AND i.version = x.prev
        RETURNING 1
    )
    SELECT (SELECT count(*) FROM x WHERE x.prev <> 0), (SELECT count(*) FROM upd) INTO n_want, n_done;
    IF n_done <> n_want THEN
        RAISE EXCEPTION 'stale invoice snapshot: % of % changed invoices are not at the version the batch started from',
            n_want - n_done, n_want USING ERRCODE = 'PS002';
    END IF;
END
$$;
