-- Subscription plans and customers. Not money state: the API writes them directly,
-- like checkout sessions. Subscriptions (an engine aggregate, later) bill against a
-- plan and a customer by id; the (merchant_id, id) keys below let them reference
-- both with the merchant in the key, so no subscription can ever link another
-- merchant's plan or customer.

CREATE TABLE plans (
    plan_id         text PRIMARY KEY,
    merchant_id     text NOT NULL REFERENCES merchants (merchant_id),
    name            text NOT NULL,
    amount          numeric(20, 2) NOT NULL CHECK (amount > 0),
    currency        text NOT NULL,
    frequency       integer NOT NULL CHECK (frequency >= 1),
    frequency_unit  text NOT NULL CHECK (frequency_unit IN ('D', 'W', 'M', 'Y')),
    billing_cycles  integer NOT NULL CHECK (billing_cycles >= 1),
    reference       text,
    redirect_url    text,
    -- version counts the plan's changes (1 when created); each version's terms are
    -- kept in plan_versions, so a billing cycle can record which terms it charged.
    version         bigint NOT NULL,
    created_at      timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL,
    UNIQUE (merchant_id, plan_id),
    -- One interval between two cycles is at most five years (the API's bound,
    -- docs/api-decisions.md), checked against the unit the row has: an update may
    -- keep the stored unit.
    CONSTRAINT plans_frequency_bound CHECK (frequency <= CASE frequency_unit
        WHEN 'D' THEN 1825 WHEN 'W' THEN 260 WHEN 'M' THEN 60 WHEN 'Y' THEN 5 END),
    CONSTRAINT plans_billing_cycles_bound CHECK (billing_cycles <= 1000)
);
-- The upsert key: a plan's name is unique per merchant (case-sensitive, as given).
CREATE UNIQUE INDEX plans_name ON plans (merchant_id, name);
CREATE INDEX plans_merchant ON plans (merchant_id, created_at DESC, plan_id DESC);

-- The terms of every version of a plan, from when they applied. A change of amount
-- or currency applies from the next billing cycle: billing reads the plan as of the
-- cycle and records (plan_id, version).
CREATE TABLE plan_versions (
    plan_id         text NOT NULL REFERENCES plans (plan_id),
    version         bigint NOT NULL,
    amount          numeric(20, 2) NOT NULL,
    currency        text NOT NULL,
    frequency       integer NOT NULL,
    frequency_unit  text NOT NULL,
    billing_cycles  integer NOT NULL,
    valid_from      timestamptz NOT NULL,
    PRIMARY KEY (plan_id, version)
);

-- One record per merchant and email (matched case-insensitively, stored as first
-- given), shared by subscription customers, the /customers/ API and payers.
CREATE TABLE customers (
    customer_id   text PRIMARY KEY,
    merchant_id   text NOT NULL REFERENCES merchants (merchant_id),
    email         text NOT NULL,
    first_name    text,
    last_name     text,
    phone_number  text,
    reference     text,
    address       text,
    city          text,
    state         text,
    zipcode       text,
    country       text,
    version       bigint NOT NULL,
    created_at    timestamptz NOT NULL,
    updated_at    timestamptz NOT NULL,
    UNIQUE (merchant_id, customer_id),
    -- Card billing in these countries needs the postal code (address verification):
    -- the rule holds for the stored record, whatever wrote it and in any order.
    CONSTRAINT customers_zipcode_required CHECK (country IS NULL OR country NOT IN ('US', 'CA', 'GB') OR zipcode IS NOT NULL)
);
CREATE UNIQUE INDEX customers_email ON customers (merchant_id, lower(email));
CREATE INDEX customers_merchant ON customers (merchant_id, created_at DESC, customer_id DESC);

-- A customer's payments: the merchant's invoices paid with the customer's email,
-- whatever its case, newest first.
CREATE INDEX invoices_email_lower ON invoices (merchant_id, lower(data ->> 'email'), created_at DESC) WHERE data ? 'email';
