-- Checkout sessions: what a merchant asked a customer to pay, and the hosted page's
-- data. Not money state: the API writes them directly. Whether a session is paid is
-- read from its invoices (the engine's), never stored here.
CREATE TABLE checkouts (
    checkout_id    uuid PRIMARY KEY,
    merchant_id    text NOT NULL REFERENCES merchants (merchant_id),
    amount         numeric(20, 2),
    currency       text NOT NULL,
    email          text,
    api_ref        text,
    card_tarrif    text NOT NULL,
    mobile_tarrif  text NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX checkouts_api_ref ON checkouts (merchant_id, api_ref, created_at DESC) WHERE api_ref IS NOT NULL;

-- Invoices paid through a checkout carry its id in their JSON state.
CREATE INDEX invoices_checkout ON invoices ((data ->> 'checkout_id')) WHERE data ? 'checkout_id';
CREATE INDEX invoices_email ON invoices (merchant_id, (data ->> 'email')) WHERE data ? 'email';
