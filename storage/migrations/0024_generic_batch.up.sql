-- The batch commit becomes generic over aggregates (docs/adr/0003-generic-batch-commit.md).
--
-- paysvc_commit_batch keeps a fixed core: the partition fence (PS001), the offset,
-- the wallets (typed arrays: the hot path of every transfer, measured faster than
-- jsonb), the ledger entries, the processed commands with their replies and the
-- outbox. Every other aggregate brings its own rows as jsonb, next to its kind, and
-- the core hands them to that aggregate's own function
--     paysvc_apply_<kind>(rows jsonb, at timestamptz)
-- inside the same call: still one round trip and one transaction per batch. A new
-- aggregate adds its table, its function and its row in batch_aggregates in its
-- own migration; nothing here changes.

-- The kinds the core may dispatch to. The pattern keeps the function name a plain
-- identifier, and the core refuses a kind that is not here (a binary newer than the
-- schema), so no text the engine sends ever becomes SQL.
CREATE TABLE batch_aggregates (
    kind        text PRIMARY KEY CHECK (kind ~ '^[a-z][a-z0-9_]{0,40}$'),
    description text NOT NULL
);

-- Invoices (collections), as written by 0005/0012: version-checked, prev 0 inserts.
CREATE FUNCTION paysvc_apply_invoice(p_rows jsonb, p_at timestamptz) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    n bigint;
    r record;
BEGIN
    FOR r IN SELECT * FROM jsonb_to_recordset(p_rows) AS x(invoice_id text, merchant_id text, state text, api_ref text,
                 checkout_request_id text, version bigint, prev bigint, data jsonb, created_at timestamptz, updated_at timestamptz) LOOP
        IF r.prev = 0 THEN
            INSERT INTO invoices (invoice_id, merchant_id, state, api_ref, checkout_request_id, version, data, created_at, updated_at)
            VALUES (r.invoice_id, r.merchant_id, r.state, NULLIF(r.api_ref, ''), NULLIF(r.checkout_request_id, ''), r.version,
                    r.data, r.created_at, r.updated_at);
        ELSE
            UPDATE invoices
               SET state = r.state, checkout_request_id = NULLIF(r.checkout_request_id, ''), version = r.version,
                   data = r.data, updated_at = r.updated_at
             WHERE invoice_id = r.invoice_id AND version = r.prev;
            GET DIAGNOSTICS n = ROW_COUNT;
            IF n <> 1 THEN
                RAISE EXCEPTION 'stale invoice snapshot: % is not at version %', r.invoice_id, r.prev USING ERRCODE = 'PS002';
            END IF;
        END IF;
    END LOOP;
END
$$;
INSERT INTO batch_aggregates (kind, description) VALUES ('invoice', 'collections: invoices (storage/invoices.go)');

-- Payment files: {"files": [...headers, prev 0 inserts...], "txns": [...the changed transactions...]},
-- as written by 0012.
CREATE FUNCTION paysvc_apply_payout(p_rows jsonb, p_at timestamptz) RETURNS void LANGUAGE plpgsql AS $$
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
INSERT INTO batch_aggregates (kind, description) VALUES ('payout', 'payouts: payment files and their transactions (storage/payouts.go)');

DROP FUNCTION paysvc_commit_batch(text, integer, bigint, bigint, timestamptz,
    text[], text[], text[], text[], text[], boolean[], text[], text[], bigint[], text[], text[],
    text[], text[], text[], bigint[], bigint[], text[], text[], boolean[],
    text[], text[], text[], text[], text[], text[], text[], text[], text[], text[],
    text[], text[], text[], bigint[], bytea[],
    text[], text[], text[], text[], bytea[],
    text[], text[], text[], text[], text[], bigint[], bigint[], text[], text[], text[],
    jsonb, jsonb);

CREATE FUNCTION paysvc_commit_batch(
    p_topic text, p_partition integer, p_epoch bigint, p_next_offset bigint, p_at timestamptz,
    -- wallets opened in the batch
    nw_id text[], nw_merchant text[], nw_currency text[], nw_type text[], nw_label text[], nw_disburse boolean[],
    nw_cur text[], nw_avail text[], nw_version bigint[], nw_created text[], nw_updated text[],
    -- wallets changed in the batch, with the version the batch started from
    uw_id text[], uw_cur text[], uw_avail text[], uw_version bigint[], uw_prev bigint[], uw_updated text[],
    uw_label text[], uw_disburse boolean[],
    -- ledger entries ('' running balance and wallet mean NULL)
    e_txn text[], e_cmd text[], e_merchant text[], e_account text[], e_wallet text[], e_currency text[],
    e_amount text[], e_running text[], e_type text[], e_narrative text[],
    -- processed commands and their replies
    c_id text[], c_merchant text[], c_type text[], c_offset bigint[], c_reply bytea[],
    -- outbox events
    o_id text[], o_topic text[], o_key text[], o_merchant text[], o_body bytea[],
    -- every other aggregate: a_rows[i] goes to paysvc_apply_<a_kind[i]>, in this order
    a_kind text[], a_rows jsonb[]
) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    n bigint;
BEGIN
    UPDATE partition_offsets SET next_offset = p_next_offset, updated_at = now()
     WHERE topic = p_topic AND partition = p_partition AND epoch = p_epoch;
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n <> 1 THEN
        RAISE EXCEPTION 'partition %/% fenced at epoch %', p_topic, p_partition, p_epoch USING ERRCODE = 'PS001';
    END IF;

    IF cardinality(nw_id) > 0 THEN
        INSERT INTO wallets (wallet_id, merchant_id, currency, wallet_type, label, can_disburse,
                             current_balance, available_balance, version, created_at, updated_at)
        SELECT i, m, c, t, l, d, cur::numeric, av::numeric, v, cr::timestamptz, up::timestamptz
          FROM unnest(nw_id, nw_merchant, nw_currency, nw_type, nw_label, nw_disburse,
                      nw_cur, nw_avail, nw_version, nw_created, nw_updated) AS x(i, m, c, t, l, d, cur, av, v, cr, up);
    END IF;

    -- One primary-key update per wallet: a join of the whole array against wallets
    -- was planned as a sequential scan of the table (measured: one per batch).
    FOR i IN 1 .. coalesce(cardinality(uw_id), 0) LOOP
        UPDATE wallets
           SET current_balance = uw_cur[i]::numeric, available_balance = uw_avail[i]::numeric,
               version = uw_version[i], updated_at = uw_updated[i]::timestamptz,
               label = uw_label[i], can_disburse = uw_disburse[i]
         WHERE wallet_id = uw_id[i] AND version = uw_prev[i];
        GET DIAGNOSTICS n = ROW_COUNT;
        IF n <> 1 THEN
            RAISE EXCEPTION 'stale wallet snapshot: % is not at version %', uw_id[i], uw_prev[i]
                USING ERRCODE = 'PS002';
        END IF;
    END LOOP;

    -- Errors raised inside an aggregate's function (PS002, or class 22/23/54 for bad
    -- data) reach the caller with their own SQLSTATE, as if raised here.
    FOR i IN 1 .. coalesce(cardinality(a_kind), 0) LOOP
        PERFORM 1 FROM batch_aggregates WHERE kind = a_kind[i];
        IF NOT FOUND THEN
            -- Not a data error (not class 22/23/54): the engine retries the batch
            -- until the migration that registers the kind is applied.
            RAISE EXCEPTION 'batch: aggregate kind % is not registered in batch_aggregates', quote_literal(a_kind[i])
                USING ERRCODE = 'PS003';
        END IF;
        EXECUTE format('SELECT %I($1, $2)', 'paysvc_apply_' || a_kind[i]) USING a_rows[i], p_at;
    END LOOP;

    IF cardinality(e_txn) > 0 THEN
        INSERT INTO ledger_entries (transaction_id, command_id, merchant_id, account, wallet_id, currency,
                                    amount, running_balance, trans_type, narrative, created_at)
        SELECT t, c, m, a, NULLIF(w, ''), cu, am::numeric, NULLIF(r, '')::numeric, ty, na, p_at
          FROM unnest(e_txn, e_cmd, e_merchant, e_account, e_wallet, e_currency, e_amount, e_running, e_type, e_narrative)
               AS x(t, c, m, a, w, cu, am, r, ty, na);
    END IF;

    IF cardinality(c_id) > 0 THEN
        INSERT INTO processed_commands (command_id, merchant_id, command_type, kafka_partition, kafka_offset, reply)
        SELECT i, m, t, p_partition, o, r FROM unnest(c_id, c_merchant, c_type, c_offset, c_reply) AS x(i, m, t, o, r);
    END IF;

    IF cardinality(o_id) > 0 THEN
        INSERT INTO outbox (event_id, topic, record_key, merchant_id, body)
        SELECT * FROM unnest(o_id, o_topic, o_key, o_merchant, o_body);
    END IF;
END
$$;
