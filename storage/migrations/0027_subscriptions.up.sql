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

-- Each cycle's charge attempt and its invoice (GET .../transactions/). An attempt
-- row is written in the batch that opens the invoice, so the two never disagree.
CREATE TABLE subscription_invoices (
    invoice_id      text PRIMARY KEY,
    subscription_id text NOT NULL REFERENCES subscriptions (subscription_id),
    merchant_id     text NOT NULL,
    slot            integer NOT NULL,
    cycle_date      date NOT NULL,
    created_at      timestamptz NOT NULL,
    UNIQUE (subscription_id, slot)
);

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

-- {"subs": [...snapshots, prev 0 inserts...], "attempts": [...new cycle attempts...]}
CREATE FUNCTION paysvc_apply_subscription(p_rows jsonb, p_at timestamptz) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    n bigint;
    r record;
BEGIN
    FOR r IN SELECT * FROM jsonb_to_recordset(p_rows->'subs') AS x(subscription_id text, merchant_id text, customer_id text,
                 plan_id text, status text, next_date date, billing boolean, test_clock_id text, setup_token_hash text,
                 version bigint, prev bigint, data jsonb, created_at timestamptz, updated_at timestamptz) LOOP
        IF r.prev = 0 THEN
            INSERT INTO subscriptions (subscription_id, merchant_id, customer_id, plan_id, status, next_date, billing,
                                       test_clock_id, setup_token_hash, version, data, created_at, updated_at)
            VALUES (r.subscription_id, r.merchant_id, r.customer_id, r.plan_id, r.status, r.next_date, r.billing,
                    NULLIF(r.test_clock_id, ''), NULLIF(r.setup_token_hash, ''), r.version, r.data, r.created_at, r.updated_at);
        ELSE
            UPDATE subscriptions
               SET plan_id = r.plan_id, status = r.status, next_date = r.next_date, billing = r.billing,
                   version = r.version, data = r.data, updated_at = r.updated_at
             WHERE subscription_id = r.subscription_id AND version = r.prev;
            GET DIAGNOSTICS n = ROW_COUNT;
            IF n <> 1 THEN
                RAISE EXCEPTION 'stale subscription snapshot: % is not at version %', r.subscription_id, r.prev USING ERRCODE = 'PS002';
            END IF;
        END IF;
    END LOOP;
    IF jsonb_array_length(coalesce(p_rows->'attempts', '[]')) > 0 THEN
        INSERT INTO subscription_invoices (invoice_id, subscription_id, merchant_id, slot, cycle_date, created_at)
        SELECT invoice_id, subscription_id, merchant_id, slot, cycle_date, p_at
          FROM jsonb_to_recordset(p_rows->'attempts') AS x(invoice_id text, subscription_id text, merchant_id text,
               slot integer, cycle_date date);
    END IF;
END
$$;
INSERT INTO batch_aggregates (kind, description) VALUES ('subscription', 'recurring billing: subscriptions (storage/subscriptions.go)');
