-- The batch commit as an engine of an earlier release calls it: no invoice arrays
-- (its invoices come as jsonb rows, which the aggregate loop hands to
-- paysvc_apply_invoice). A wrapper of paysvc_commit_batches_v3, so there is one copy
-- of the commit. This release's Go code does not call it; it stays so that such an
-- engine, still running during a rolling deploy, commits as before.

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
BEGIN
    -- An engine of the previous release sends its invoices as jsonb rows, which the
    -- aggregate loop hands to paysvc_apply_invoice as before.
    PERFORM paysvc_commit_batches_v3(p_topic, p_partition, p_epoch, p_next_offset, p_at,
        nw_id, nw_merchant, nw_currency, nw_type, nw_label, nw_disburse, nw_cur, nw_avail, nw_version, nw_created, nw_updated,
        uw_id, uw_cur, uw_avail, uw_version, uw_prev, uw_updated, uw_label, uw_disburse,
        e_txn, e_cmd, e_merchant, e_account, e_wallet, e_currency, e_amount, e_running, e_type, e_narrative,
        c_id, c_merchant, c_type, c_partition, c_offset, c_reply,
        o_id, o_topic, o_key, o_merchant, o_body,
        a_kind, a_rows,
        '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}');
END
$$;
