-- Subscriptions: recurring card billing (actors/subscription, docs/state-machines.md).
--
-- A subscription is an aggregate of the generic batch commit (ADR 0003): its rows
-- come to paysvc_apply_subscription inside the batch's one transaction. plan_id and
-- customer_id name rows of the plans/customers tables of issue 10; they are kept
-- without foreign keys so the engine's batch never waits on those tables' locks
-- (the API checks both exist and belong to the merchant before creating).

CREATE TABLE subscriptions (
    subscription_id  text PRIMARY KEY,
    merchant_id      text NOT NULL REFERENCES merchants (merchant_id),
    customer_id      text NOT NULL,
    plan_id          text NOT NULL,
    status           text NOT NULL,
    -- The date the next cycle is due (00:00 Africa/Nairobi of that date), null when
    -- nothing more will be billed.
    next_date        date,
    -- billing: ACTIVE or FAILED, a next date, no charge in flight: what the
    -- scheduler scans for, through the partial indexes below.
    billing          boolean NOT NULL,
    test_clock_id    text,
    -- SHA-256 (hex) of the setup_url's token: the token is a capability and is
    -- never stored.
    setup_token_hash text UNIQUE,
    version          bigint NOT NULL,
    data             jsonb NOT NULL,
    created_at       timestamptz NOT NULL,
    updated_at       timestamptz NOT NULL
);
CREATE INDEX subscriptions_merchant ON subscriptions (merchant_id, created_at);
CREATE INDEX subscriptions_due ON subscriptions (next_date) WHERE billing AND test_clock_id IS NULL;
CREATE INDEX subscriptions_due_clock ON subscriptions (test_clock_id, next_date) WHERE billing AND test_clock_id IS NOT NULL;
ALTER TABLE subscriptions SET (fillfactor = 80);


-- Each cycle's charge (GET .../transactions/, and the customer's payments): an
-- invoice-shaped record (data: the JSON of an invoice, provider CARD), written by
-- the batch that charged the cycle, from the subscription's last_payment, so the
-- record and the ledger entries of the charge commit together or not at all.
CREATE TABLE subscription_invoices (
    invoice_id      text PRIMARY KEY,
    subscription_id text NOT NULL REFERENCES subscriptions (subscription_id),
    merchant_id     text NOT NULL,
    customer_id     text NOT NULL,
    slot            integer NOT NULL,
    cycle_date      date NOT NULL,
    status          text NOT NULL,
    data            jsonb NOT NULL,
    created_at      timestamptz NOT NULL
);
CREATE INDEX subscription_invoices_sub ON subscription_invoices (subscription_id, created_at);
CREATE INDEX subscription_invoices_customer ON subscription_invoices (merchant_id, customer_id, created_at);

-- Sandbox test clocks (Stripe's test clocks): a subscription attached to one is
-- due by the clock's frozen_time instead of the wall clock. Not money: written by
-- the API directly; advancing one lets the scheduler bill what fell due.
CREATE TABLE subscription_test_clocks (
    clock_id    text PRIMARY KEY,
    merchant_id text NOT NULL REFERENCES merchants (merchant_id),
    name        text NOT NULL DEFAULT '',
    frozen_time timestamptz NOT NULL,
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL
);
CREATE INDEX subscription_test_clocks_merchant ON subscription_test_clocks (merchant_id, created_at);

-- The engine's generic rows (ADR 0004): [{"id","merchant_id","prev","version","state"}],
-- prev 0 inserts. The columns the scheduler and the API search by are taken from
-- the state (actors/subscription.State); billing mirrors State.Billing().
CREATE FUNCTION paysvc_apply_subscription(p_rows jsonb, p_at timestamptz) RETURNS void LANGUAGE plpgsql AS $$
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
INSERT INTO batch_aggregates (kind, description) VALUES ('subscription', 'recurring billing: subscriptions (actors/subscription/subscriptionkind)');
