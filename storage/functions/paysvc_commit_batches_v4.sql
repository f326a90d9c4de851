-- The batch commit of a batch that holds a traced event: storage.CommitBatch and
-- CommitBatches call it instead of paysvc_commit_batches_v3 when an event carries a
-- W3C traceparent (docs/tracing.md), so tracing off costs the commit nothing.
--
-- It is _v3 with the outbox arrays taken out of it and written here with their
-- traceparents: _v3's outbox INSERT is its last statement, so the commit does the
-- same writes in the same order, and there is one copy of the commit.

CREATE OR REPLACE FUNCTION paysvc_commit_batches_v4(
    p_topic text, p_partition integer[], p_epoch bigint[], p_next_offset bigint[], p_at timestamptz,
    nw_id text[], nw_merchant text[], nw_currency text[], nw_type text[], nw_label text[], nw_disburse boolean[],
    nw_cur text[], nw_avail text[], nw_version bigint[], nw_created text[], nw_updated text[],
    uw_id text[], uw_cur text[], uw_avail text[], uw_version bigint[], uw_prev bigint[], uw_updated text[],
    uw_label text[], uw_disburse boolean[],
    e_txn text[], e_cmd text[], e_merchant text[], e_account text[], e_wallet text[], e_currency text[],
    e_amount text[], e_running text[], e_type text[], e_narrative text[],
    c_id text[], c_merchant text[], c_type text[], c_partition integer[], c_offset bigint[], c_reply text[],
    -- outbox events, each with its traceparent
    o_id text[], o_topic text[], o_key text[], o_merchant text[], o_body text[],
    a_kind text[], a_rows jsonb[],
    i_id text[], i_merchant text[], i_state text[], i_api_ref text[], i_checkout_request text[],
    i_version bigint[], i_prev bigint[], i_data text[], i_created text[], i_updated text[],
    o_trace text[]
) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM paysvc_commit_batches_v3(p_topic, p_partition, p_epoch, p_next_offset, p_at,
        nw_id, nw_merchant, nw_currency, nw_type, nw_label, nw_disburse, nw_cur, nw_avail, nw_version, nw_created, nw_updated,
        uw_id, uw_cur, uw_avail, uw_version, uw_prev, uw_updated, uw_label, uw_disburse,
        e_txn, e_cmd, e_merchant, e_account, e_wallet, e_currency, e_amount, e_running, e_type, e_narrative,
        c_id, c_merchant, c_type, c_partition, c_offset, c_reply,
        '{}', '{}', '{}', '{}', '{}',
        a_kind, a_rows,
        i_id, i_merchant, i_state, i_api_ref, i_checkout_request, i_version, i_prev, i_data, i_created, i_updated);
    -- As _v3 writes it (its last statement), with the traceparents.
    IF cardinality(o_id) > 0 THEN
        INSERT INTO outbox (event_ids, topics, record_keys, merchant_ids, bodies, traceparents)
        VALUES (o_id, o_topic, o_key, o_merchant, o_body, o_trace);
    END IF;
END
$$;
