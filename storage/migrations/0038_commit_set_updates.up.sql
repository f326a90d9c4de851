-- The commit function updates wallets and partition offsets set-based (issue 11,
-- docs/benchmarks.md "Session 7").
--
-- paysvc_commit_batches_v2 ran one UPDATE per changed wallet and one per partition
-- in PL/pgSQL loops. Each iteration starts an executor and prepares the table's
-- CHECK constraints again: perf of PostgreSQL under transfer-spread put
-- standard_ExecutorStart at 7.7% and ExecConstraints at 8.7% of its CPU, and
-- pg_stat_statements (track = all) 86,224 wallet UPDATEs at 13 us each, 0.55 ms of
-- a 1.74 ms commit. One UPDATE joined to the unnested arrays does the same work
-- with one executor start.
--
-- The guarantees are the old ones. A wallet is updated only if still at the version
-- its batch started from; the arrays name each wallet once (a batch keeps one write
-- per wallet, and a wallet's merchant is in one partition of the group), so the
-- row count says whether every one was, and if not the whole commit is stale
-- (PS002) and rolls back. Likewise a partition whose epoch moved fences the commit
-- (PS001). The messages still name one culprit; the engine reads only the SQLSTATE.
--
-- SET enable_seqscan = off for the reason of 0037: the loop's one-row UPDATE was
-- written because a join of the array against wallets was planned as a sequential
-- scan of the table once per batch; PL/pgSQL caches plans per connection, and one
-- made while the table was small stays. Off, the join always probes the primary key.
-- The setting covers the nested paysvc_apply_* calls too, which want the same.
--
-- Same signature: paysvc_commit_batch_v2 (one partition) calls this one and follows.
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
) RETURNS void LANGUAGE plpgsql
SET enable_seqscan = off AS $$
DECLARE
    n bigint;
    fp integer;
    fe bigint;
    sw text;
    sv bigint;
BEGIN
    UPDATE partition_offsets o SET next_offset = x.n, updated_at = now()
      FROM unnest(p_partition, p_epoch, p_next_offset) AS x(p, e, n)
     WHERE o.topic = p_topic AND o.partition = x.p AND o.epoch = x.e;
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n <> cardinality(p_partition) THEN
        -- Name the first fenced partition, as the loop did (the engine reads only
        -- the SQLSTATE; a grouped commit then commits each partition on its own).
        SELECT x.p, x.e INTO fp, fe
          FROM unnest(p_partition, p_epoch) AS x(p, e)
         WHERE NOT EXISTS (SELECT 1 FROM partition_offsets o
                            WHERE o.topic = p_topic AND o.partition = x.p AND o.epoch = x.e)
         LIMIT 1;
        RAISE EXCEPTION 'partition %/% fenced at epoch %', p_topic, fp, fe USING ERRCODE = 'PS001';
    END IF;

    IF cardinality(nw_id) > 0 THEN
        INSERT INTO wallets (wallet_id, merchant_id, currency, wallet_type, label, can_disburse,
                             current_balance, available_balance, version, created_at, updated_at)
        SELECT i, m, c, t, l, d, cur::numeric, av::numeric, v, cr::timestamptz, up::timestamptz
          FROM unnest(nw_id, nw_merchant, nw_currency, nw_type, nw_label, nw_disburse,
                      nw_cur, nw_avail, nw_version, nw_created, nw_updated) AS x(i, m, c, t, l, d, cur, av, v, cr, up);
    END IF;

    -- One UPDATE for every changed wallet, each still at the version its batch
    -- started from. The arrays name a wallet once (a batch keeps one write per
    -- wallet, and a wallet belongs to one merchant, so to one partition of the
    -- group), so the row count says whether every wallet was still at its version.
    IF cardinality(uw_id) > 0 THEN
        UPDATE wallets w
           SET current_balance = x.cur::numeric, available_balance = x.av::numeric,
               version = x.v, updated_at = x.up::timestamptz, label = x.l, can_disburse = x.d
          FROM unnest(uw_id, uw_cur, uw_avail, uw_version, uw_prev, uw_updated, uw_label, uw_disburse)
               AS x(i, cur, av, v, prev, up, l, d)
         WHERE w.wallet_id = x.i AND w.version = x.prev;
        GET DIAGNOSTICS n = ROW_COUNT;
        IF n <> cardinality(uw_id) THEN
            -- Name one that was not updated (the updated ones are at their new version).
            SELECT x.i, x.prev INTO sw, sv
              FROM unnest(uw_id, uw_prev, uw_version) AS x(i, prev, v)
             WHERE NOT EXISTS (SELECT 1 FROM wallets w WHERE w.wallet_id = x.i AND w.version = x.v)
             LIMIT 1;
            RAISE EXCEPTION 'stale wallet snapshot: % of % wallets not at the version the batch started from (% at %)',
                cardinality(uw_id) - n, cardinality(uw_id), coalesce(sw, '?'), coalesce(sv::text, '?') USING ERRCODE = 'PS002';
        END IF;
    END IF;

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
