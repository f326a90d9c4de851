-- One outbox row per engine commit instead of one per event (issue 11,
-- docs/benchmarks.md "Session 5").
--
-- Every event of a commit was its own outbox row: a heap tuple and a primary-key
-- entry written in the commit, then a deletion and its vacuum after the relay
-- published it, for each of the ~30 events of a transaction under load. Now the
-- commit writes one row whose arrays hold its events in order, and the relay
-- expands it and deletes the row once every event in it reached Kafka (or was set
-- aside in outbox_dead). Rows of one event (the sandbox's sample events, rows an
-- older engine wrote) keep the old columns; the relay reads both shapes in
-- outbox_id order, so the order of a partition's events is kept across a deploy.
--
-- The bodies stay the exact bytes published: JSON the engine encoded, sent as text
-- (0035) and now kept as text[], which holds those bytes unchanged. The row of a
-- busy commit is ~20 kB of JSON: it is compressed with lz4 where the server has it
-- (fast, and JSON shrinks 3-5x) and may stay in the page up to 8 kB, so it is
-- usually one heap tuple, not a set of TOAST chunks.
--
-- Rolling deploy: a relay of the previous release cannot read the new rows (its
-- scan fails on the NULL single-event columns) and retries without publishing or
-- deleting anything, so their events wait, in order, for a relay of this release.

ALTER TABLE outbox
    ALTER COLUMN event_id DROP NOT NULL,
    ALTER COLUMN topic DROP NOT NULL,
    ALTER COLUMN record_key DROP NOT NULL,
    ALTER COLUMN merchant_id DROP NOT NULL,
    ALTER COLUMN body DROP NOT NULL,
    ADD COLUMN event_ids text[],
    ADD COLUMN topics text[],
    ADD COLUMN record_keys text[],
    ADD COLUMN merchant_ids text[],
    ADD COLUMN bodies text[],
    ADD CONSTRAINT outbox_one_shape CHECK (
        (event_id IS NOT NULL AND topic IS NOT NULL AND record_key IS NOT NULL AND merchant_id IS NOT NULL
            AND body IS NOT NULL
            AND event_ids IS NULL AND topics IS NULL AND record_keys IS NULL AND merchant_ids IS NULL AND bodies IS NULL)
        OR (event_id IS NULL AND topic IS NULL AND record_key IS NULL AND merchant_id IS NULL AND body IS NULL
            AND cardinality(event_ids) > 0
            AND array_ndims(event_ids) = 1
            AND cardinality(topics) = cardinality(event_ids) AND cardinality(record_keys) = cardinality(event_ids)
            AND cardinality(merchant_ids) = cardinality(event_ids) AND cardinality(bodies) = cardinality(event_ids)
            AND array_position(event_ids, NULL) IS NULL AND array_position(topics, NULL) IS NULL
            AND array_position(record_keys, NULL) IS NULL AND array_position(merchant_ids, NULL) IS NULL
            AND array_position(bodies, NULL) IS NULL));

ALTER TABLE outbox SET (toast_tuple_target = 8160);

DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_settings WHERE name = 'default_toast_compression' AND 'lz4' = ANY (enumvals)) THEN
        ALTER TABLE outbox ALTER COLUMN bodies SET COMPRESSION lz4;
    END IF;
END
$$;

-- Several events of one row can be set aside: they are told apart by event id.
ALTER TABLE outbox_dead DROP CONSTRAINT outbox_dead_pkey, ADD PRIMARY KEY (outbox_id, event_id);

-- paysvc_commit_batches_v2 of 0035 with only the outbox INSERT changed (the
-- signature is the same, so paysvc_commit_batch_v2, which calls it, follows).
CREATE OR REPLACE FUNCTION paysvc_commit_batches_v2(
    -- one element per partition: its fence and its new offset
    p_topic text, p_partition integer[], p_epoch bigint[], p_next_offset bigint[], p_at timestamptz,
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
    c_id text[], c_merchant text[], c_type text[], c_partition integer[], c_offset bigint[], c_reply text[],
    -- outbox events
    o_id text[], o_topic text[], o_key text[], o_merchant text[], o_body text[],
    -- every other aggregate: a_rows[i] goes to paysvc_apply_<a_kind[i]>, in this order
    a_kind text[], a_rows jsonb[]
) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    n bigint;
BEGIN
    FOR i IN 1 .. cardinality(p_partition) LOOP
        UPDATE partition_offsets SET next_offset = p_next_offset[i], updated_at = now()
         WHERE topic = p_topic AND partition = p_partition[i] AND epoch = p_epoch[i];
        GET DIAGNOSTICS n = ROW_COUNT;
        IF n <> 1 THEN
            RAISE EXCEPTION 'partition %/% fenced at epoch %', p_topic, p_partition[i], p_epoch[i] USING ERRCODE = 'PS001';
        END IF;
    END LOOP;

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
        SELECT i, m, t, p, o, convert_to(r, 'UTF8') FROM unnest(c_id, c_merchant, c_type, c_partition, c_offset, c_reply) AS x(i, m, t, p, o, r);
    END IF;

    -- One outbox row for the whole commit, its events in order (migration 0036).
    IF cardinality(o_id) > 0 THEN
        INSERT INTO outbox (event_ids, topics, record_keys, merchant_ids, bodies)
        VALUES (o_id, o_topic, o_key, o_merchant, o_body);
    END IF;
END
$$;
