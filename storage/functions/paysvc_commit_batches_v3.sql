-- The engine's batch commit: one call commits the batches of one or more command
-- partitions in one transaction (docs/adr/0003-generic-batch-commit.md,
-- docs/adr/0005-one-commit-per-poll.md). storage.CommitBatch and CommitBatches call
-- it as a prepared statement, one round trip; its errors are what make a stale
-- writer fail:
--   PS001  a partition's epoch moved: this engine no longer owns it (fenced);
--   PS002  a wallet, invoice or other aggregate row is not at the version its batch
--          started from (stale snapshot);
--   PS003  an aggregate kind not in batch_aggregates (a binary newer than the
--          schema): retried, never set aside;
--   class 22/23/54 from the statements: bad data, the command is set aside.
--
-- The core writes the partition offsets, the wallets and the invoices (typed arrays,
-- the hot path), then hands every other aggregate's jsonb rows to its own
-- paysvc_apply_<kind>(rows, at) in the order given, then the ledger entries, the
-- processed commands with their replies, and one outbox row holding the commit's
-- events in order. Invoices go before the other aggregates, which may refer to an
-- invoice the batch opened.
--
-- Replies and bodies travel as text (JSON the engine encoded: valid UTF-8, no NUL)
-- and are stored as the exact bytes: convert_to(x, 'UTF8') for the bytea reply.
--
-- SET enable_seqscan = off: the set-based UPDATEs join the arrays to wallets and
-- invoices, and PL/pgSQL caches a plan per connection; one planned while a table
-- was small would scan the whole table on every call as it grows. Off, the joins
-- always probe the primary key. The setting covers the nested paysvc_apply_* calls.

CREATE OR REPLACE FUNCTION paysvc_commit_batches_v3(
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
    a_kind text[], a_rows jsonb[],
    -- invoices opened (i_prev 0) or changed in the batch, with the version the batch
    -- started from; i_data is each invoice's whole state as JSON
    i_id text[], i_merchant text[], i_state text[], i_api_ref text[], i_checkout_request text[],
    i_version bigint[], i_prev bigint[], i_data text[], i_created text[], i_updated text[]
) RETURNS void LANGUAGE plpgsql
SET enable_seqscan = off AS $$
DECLARE
    n bigint;
    fp integer;
    fe bigint;
    sw text;
    sv bigint;
    n_want bigint;
    n_done bigint;
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

    -- Invoices, as paysvc_apply_invoice (0037) writes them from its jsonb rows: one
    -- INSERT for the new, one UPDATE for the changed, each still at the version its
    -- batch started from. The arrays name each invoice once (a batch keeps one row
    -- per invoice; an invoice's merchant is in one partition of the group), so the
    -- UPDATE's row count says whether every changed invoice was (PS002 if not).
    -- Before the other aggregates, which may refer to an invoice opened in the batch.
    IF cardinality(i_id) > 0 THEN
        WITH x AS MATERIALIZED (
            SELECT * FROM unnest(i_id, i_merchant, i_state, i_api_ref, i_checkout_request, i_version, i_prev,
                                 i_data, i_created, i_updated)
                   AS x(invoice_id, merchant_id, state, api_ref, checkout_request_id, version, prev, data, created_at, updated_at)
        ), ins AS (
            INSERT INTO invoices (invoice_id, merchant_id, state, api_ref, checkout_request_id, version, data, created_at, updated_at)
            SELECT x.invoice_id, x.merchant_id, x.state, NULLIF(x.api_ref, ''), NULLIF(x.checkout_request_id, ''), x.version,
                   x.data::jsonb, x.created_at::timestamptz, x.updated_at::timestamptz
              FROM x
             WHERE x.prev = 0
        ), upd AS (
            UPDATE invoices i
               SET state = x.state, checkout_request_id = NULLIF(x.checkout_request_id, ''), version = x.version,
                   data = x.data::jsonb, updated_at = x.updated_at::timestamptz
              FROM x
             WHERE x.prev <> 0 AND i.invoice_id = x.invoice_id AND i.version = x.prev
            RETURNING 1
        )
        SELECT (SELECT count(*) FROM x WHERE x.prev <> 0), (SELECT count(*) FROM upd) INTO n_want, n_done;
        IF n_done <> n_want THEN
            RAISE EXCEPTION 'stale invoice snapshot: % of % changed invoices are not at the version the batch started from',
                n_want - n_done, n_want USING ERRCODE = 'PS002';
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
