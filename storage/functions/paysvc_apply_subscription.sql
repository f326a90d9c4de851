-- Subscriptions in the generic batch commit (actors/subscription, kind
-- "subscription").
--
-- Rows: [{"id", "merchant_id", "prev", "version", "state"}], prev 0 inserts;
-- otherwise updated only if still at prev (PS002 if not). The columns the scheduler
-- and the API search by are taken from the state (actors/subscription.State);
-- billing mirrors State.Billing(). A cycle's charge (the state's last_payment) is
-- recorded in subscription_invoices in the same transaction as its ledger entries,
-- once per invoice id.

CREATE OR REPLACE FUNCTION paysvc_apply_subscription(p_rows jsonb, p_at timestamptz) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    n bigint;
    r record;
    st jsonb;
    nd date;
    bill boolean;
BEGIN
    FOR r IN SELECT * FROM jsonb_to_recordset(p_rows) AS x(id text, merchant_id text, prev bigint, version bigint, state jsonb) LOOP
        st := r.state;
        nd := NULLIF(st->>'next_date', '')::date;
        bill := st->>'status' IN ('ACTIVE', 'FAILED') AND nd IS NOT NULL AND st->'attempt' IS NULL;
        IF r.prev = 0 THEN
            INSERT INTO subscriptions (subscription_id, merchant_id, customer_id, plan_id, status, next_date, billing,
                                       test_clock_id, setup_token_hash, version, data, created_at, updated_at)
            VALUES (r.id, r.merchant_id, st->>'customer_id', st->'plan'->>'plan_id', st->>'status', nd, bill,
                    NULLIF(st->>'test_clock_id', ''), NULLIF(st->>'setup_token_hash', ''), r.version, st,
                    (st->>'created_at')::timestamptz, (st->>'updated_at')::timestamptz);
        ELSE
            UPDATE subscriptions
               SET plan_id = st->'plan'->>'plan_id', status = st->>'status', next_date = nd, billing = bill,
                   version = r.version, data = st, updated_at = (st->>'updated_at')::timestamptz
             WHERE subscription_id = r.id AND merchant_id = r.merchant_id AND version = r.prev;
            GET DIAGNOSTICS n = ROW_COUNT;
            IF n <> 1 THEN
                RAISE EXCEPTION 'stale subscription snapshot: % is not at version %', r.id, r.prev USING ERRCODE = 'PS002';
            END IF;
        END IF;
        IF st->'last_payment' IS NOT NULL AND jsonb_typeof(st->'last_payment') = 'object' THEN
            INSERT INTO subscription_invoices (invoice_id, subscription_id, merchant_id, customer_id, slot, cycle_date, status, data, created_at)
            VALUES (st->'last_payment'->>'invoice_id', r.id, r.merchant_id, st->>'customer_id',
                    (st->'last_payment'->>'slot')::int, (st->'last_payment'->>'date')::date, st->'last_payment'->>'status',
                    st->'last_payment'->'invoice', p_at)
            ON CONFLICT (invoice_id) DO NOTHING;
        END IF;
    END LOOP;
END
$$;
