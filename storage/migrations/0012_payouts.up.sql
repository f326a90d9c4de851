-- Payouts: payment files and their transactions, written by the engine in its batch
-- call. A file's header is one version-checked row; its transactions are rows of
-- their own, so a rail result for 500 of a file's 10,000 transactions writes 500
-- rows. The batch function gains the two jsonb arguments that carry them.

-- Settlement wallets are the default source of payouts, so they can disburse.
UPDATE wallets SET can_disburse = true WHERE wallet_type = 'SETTLEMENT';

CREATE TABLE payout_files (
    file_id      text PRIMARY KEY,
    merchant_id  text NOT NULL REFERENCES merchants (merchant_id),
    tracking_id  uuid NOT NULL UNIQUE,
    status       text NOT NULL,
    version      bigint NOT NULL,
    data         jsonb NOT NULL,
    created_at   timestamptz NOT NULL,
    updated_at   timestamptz NOT NULL
);
CREATE INDEX payout_files_merchant ON payout_files (merchant_id, created_at);

CREATE TABLE payout_transactions (
    transaction_id   text PRIMARY KEY,
    file_id          text NOT NULL REFERENCES payout_files (file_id),
    merchant_id      text NOT NULL,
    seq              integer NOT NULL,
    status           text NOT NULL,
    provider         text NOT NULL,
    account          text NOT NULL,
    idempotency_key  text,
    -- claims_key: this transaction holds its idempotency key (its file was approved
    -- and it has not failed), so another transaction with the key is not paid.
    claims_key       boolean NOT NULL DEFAULT false,
    data             jsonb NOT NULL,
    created_at       timestamptz NOT NULL,
    updated_at       timestamptz NOT NULL
);
CREATE UNIQUE INDEX payout_transactions_file ON payout_transactions (file_id, seq);
CREATE INDEX payout_transactions_key ON payout_transactions (merchant_id, idempotency_key) WHERE claims_key;
CREATE INDEX payout_transactions_paid ON payout_transactions (merchant_id, provider) WHERE status = 'COMPLETE';
ALTER TABLE payout_transactions SET (fillfactor = 80);

DROP FUNCTION paysvc_commit_batch(text, integer, bigint, bigint, timestamptz,
    text[], text[], text[], text[], text[], boolean[], text[], text[], bigint[], text[], text[],
    text[], text[], text[], bigint[], bigint[], text[], text[], boolean[],
    text[], text[], text[], text[], text[], text[], text[], text[], text[], text[],
    text[], text[], text[], bigint[], bytea[],
    text[], text[], text[], text[], bytea[],
    text[], text[], text[], text[], text[], bigint[], bigint[], text[], text[], text[]);

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
    -- invoice snapshots (prev version 0: a new invoice)
    iv_id text[], iv_merchant text[], iv_state text[], iv_ref text[], iv_checkout text[],
    iv_version bigint[], iv_prev bigint[], iv_data text[], iv_created text[], iv_updated text[],
    -- payment files: headers (prev 0: a new file) and the transactions they changed
    p_files jsonb, p_txns jsonb
) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    n bigint;
    f record;
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

    FOR i IN 1 .. coalesce(cardinality(iv_id), 0) LOOP
        IF iv_prev[i] = 0 THEN
            INSERT INTO invoices (invoice_id, merchant_id, state, api_ref, checkout_request_id, version, data, created_at, updated_at)
            VALUES (iv_id[i], iv_merchant[i], iv_state[i], NULLIF(iv_ref[i], ''), NULLIF(iv_checkout[i], ''), iv_version[i],
                    iv_data[i]::jsonb, iv_created[i]::timestamptz, iv_updated[i]::timestamptz);
        ELSE
            UPDATE invoices
               SET state = iv_state[i], checkout_request_id = NULLIF(iv_checkout[i], ''), version = iv_version[i],
                   data = iv_data[i]::jsonb, updated_at = iv_updated[i]::timestamptz
             WHERE invoice_id = iv_id[i] AND version = iv_prev[i];
            GET DIAGNOSTICS n = ROW_COUNT;
            IF n <> 1 THEN
                RAISE EXCEPTION 'stale invoice snapshot: % is not at version %', iv_id[i], iv_prev[i] USING ERRCODE = 'PS002';
            END IF;
        END IF;
    END LOOP;

    FOR f IN SELECT * FROM jsonb_to_recordset(p_files) AS x(file_id text, merchant_id text, tracking_id uuid, status text,
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
    IF jsonb_array_length(p_txns) > 0 THEN
        INSERT INTO payout_transactions (transaction_id, file_id, merchant_id, seq, status, provider, account,
                                         idempotency_key, claims_key, data, created_at, updated_at)
        SELECT transaction_id, file_id, merchant_id, seq, status, provider, account, NULLIF(idempotency_key, ''),
               claims_key, data, created_at, updated_at
          FROM jsonb_to_recordset(p_txns) AS x(transaction_id text, file_id text, merchant_id text, seq integer,
               status text, provider text, account text, idempotency_key text, claims_key boolean, data jsonb,
               created_at timestamptz, updated_at timestamptz)
        ON CONFLICT (transaction_id) DO UPDATE
           SET status = EXCLUDED.status, claims_key = EXCLUDED.claims_key, data = EXCLUDED.data, updated_at = EXCLUDED.updated_at
         WHERE payout_transactions.file_id = EXCLUDED.file_id;
    END IF;

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
