-- Replies and event bodies sent as text, not hex (issue 11, docs/benchmarks.md
-- "Session 4").
--
-- The engine sent each command's stored reply and each outbox body as bytea[]:
-- lib/pq writes bytea as hex inside the array literal, so ~1.3 kB of JSON per
-- transfer travelled as ~2.7 kB, built and copied several times in Go (the commit's
-- arguments were 44% of every byte the service allocated) and hex-decoded by
-- PostgreSQL. Both are JSON the engine encoded itself, so they are valid UTF-8
-- without NUL, and travel as text[]; the columns stay bytea (the exact bytes a
-- replay resends), filled with convert_to(x, 'UTF8'), byte for byte the same. A
-- reply that were not valid UTF-8 would be refused with SQLSTATE 22021, a data
-- error, and its command set aside like any other that fails on its own.
--
-- paysvc_commit_batches_v2 is the function of 0030 with only those two parameters
-- and the two INSERTs changed; paysvc_commit_batch_v2 (one partition, 0024's
-- signature with the same change) calls it with arrays of one. They take
-- new names rather than replacing the old ones under the same names: lib/pq sends
-- untyped parameters, so an engine of the previous release still running during a
-- rolling deploy would bind its hex literals to text parameters and store the hex
-- itself as replies and events. The old functions are dropped instead, so there is
-- one copy of the commit, and such an engine fails its commits loudly (SQLSTATE
-- 42883, retried, never set aside) and applies nothing until it is replaced.

CREATE FUNCTION paysvc_commit_batches_v2(
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

    IF cardinality(o_id) > 0 THEN
        INSERT INTO outbox (event_id, topic, record_key, merchant_id, body)
        SELECT i, tp, k, m, convert_to(bd, 'UTF8') FROM unnest(o_id, o_topic, o_key, o_merchant, o_body) AS x(i, tp, k, m, bd);
    END IF;
END
$$;

CREATE FUNCTION paysvc_commit_batch_v2(
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
    c_id text[], c_merchant text[], c_type text[], c_offset bigint[], c_reply text[],
    -- outbox events
    o_id text[], o_topic text[], o_key text[], o_merchant text[], o_body text[],
    -- every other aggregate: a_rows[i] goes to paysvc_apply_<a_kind[i]>, in this order
    a_kind text[], a_rows jsonb[]
) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    -- One partition is paysvc_commit_batches_v2 with arrays of one: a single copy
    -- of the commit's checks and writes (the same statements, errors and SQLSTATEs).
    PERFORM paysvc_commit_batches_v2(p_topic, ARRAY[p_partition], ARRAY[p_epoch], ARRAY[p_next_offset], p_at,
        nw_id, nw_merchant, nw_currency, nw_type, nw_label, nw_disburse, nw_cur, nw_avail, nw_version, nw_created, nw_updated,
        uw_id, uw_cur, uw_avail, uw_version, uw_prev, uw_updated, uw_label, uw_disburse,
        e_txn, e_cmd, e_merchant, e_account, e_wallet, e_currency, e_amount, e_running, e_type, e_narrative,
        c_id, c_merchant, c_type, array_fill(p_partition, ARRAY[coalesce(cardinality(c_id), 0)]), c_offset, c_reply,
        o_id, o_topic, o_key, o_merchant, o_body,
        a_kind, a_rows);
END
$$;

DROP FUNCTION paysvc_commit_batch(text, integer, bigint, bigint, timestamptz,
    text[], text[], text[], text[], text[], boolean[], text[], text[], bigint[], text[], text[],
    text[], text[], text[], bigint[], bigint[], text[], text[], boolean[],
    text[], text[], text[], text[], text[], text[], text[], text[], text[], text[],
    text[], text[], text[], bigint[], bytea[],
    text[], text[], text[], text[], bytea[],
    text[], jsonb[]);

DROP FUNCTION paysvc_commit_batches(text, integer[], bigint[], bigint[], timestamptz,
    text[], text[], text[], text[], text[], boolean[], text[], text[], bigint[], text[], text[],
    text[], text[], text[], bigint[], bigint[], text[], text[], boolean[],
    text[], text[], text[], text[], text[], text[], text[], text[], text[], text[],
    text[], text[], text[], integer[], bigint[], bytea[],
    text[], text[], text[], text[], bytea[],
    text[], jsonb[]);
