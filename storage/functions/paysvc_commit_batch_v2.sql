-- The one-partition batch commit of an engine of an earlier release:
-- paysvc_commit_batches_v2 with arrays of one, so there is one copy of the commit's
-- checks and writes (the same statements, errors and SQLSTATEs). This release's Go
-- code does not call it (storage's tests do); it stays for rolling deploys.

CREATE OR REPLACE FUNCTION paysvc_commit_batch_v2(
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
