-- Invoices are written set-based (issue 11, docs/benchmarks.md "Session 6").
--
-- paysvc_apply_invoice ran one INSERT or UPDATE per invoice in a PL/pgSQL loop.
-- Under STK load it was 59% of the commit function's time (pg_stat_statements,
-- track = all: 4,315 calls, 0.58 ms each, in 734 commits of 5.8 ms): a collection
-- writes its invoice three times (the push inserts it; ACCEPTED and FINAL update
-- it). One INSERT for the new invoices and one UPDATE for the changed ones do the
-- same work with one executor start each; measured on a copy of a bench database,
-- 15 rows a call went from 0.50 to 0.44 ms and 45 rows from 1.17 to 0.84 ms.
--
-- The guarantees are the old ones. A row is new (prev = 0: inserted; an existing
-- id fails the primary key, 23505) or changed (updated only if still at prev). The
-- rows of one call name each invoice once (storage.InvoiceWrites keeps one row per
-- invoice, with the version the batch started from), so the UPDATE's count says
-- whether every changed invoice was still at its version; if not, the batch is
-- stale (PS002) and rolls back whole, as before. The old message named the first
-- stale invoice; this one names how many, and the engine only reads the SQLSTATE.
--
-- SET enable_seqscan = off: the UPDATE joins the rows to invoices, and a plan made
-- while the table was small (PL/pgSQL caches it per connection) scanned the whole
-- table for every call as it grew (perf, STK load: heap_getnextslot under this
-- function). Off, the join always probes the primary key, as the one-row UPDATE
-- of the loop did.
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
