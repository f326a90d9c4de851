-- Payment links (issue 10, item 8): a merchant's reusable hosted payment page.
-- Configuration, not money state: the API writes them directly, like checkout
-- sessions. Each payment through a link goes through a checkout session made for
-- it (payment_link_id below), so its pricing and status are a checkout's.
CREATE TABLE payment_links (
    link_id        uuid PRIMARY KEY,
    merchant_id    text NOT NULL REFERENCES merchants (merchant_id),
    title          text NOT NULL,
    is_active      boolean NOT NULL DEFAULT true,
    redirect_url   text,
    -- Whole units of currency (the spec's integer); 0: the customer enters it.
    amount         bigint NOT NULL DEFAULT 0 CHECK (amount >= 0),
    -- Completed payments allowed; 0: unlimited.
    usage_limit    bigint NOT NULL DEFAULT 0 CHECK (usage_limit >= 0),
    currency       text NOT NULL,
    mobile_tarrif  text NOT NULL,
    card_tarrif    text NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now()
);
-- The merchant's list, newest first.
CREATE INDEX payment_links_merchant ON payment_links (merchant_id, created_at DESC, link_id DESC);

-- One row per payment started through a link, written under the link row's lock
-- before the payment's command is produced: with the invoice's state it says
-- whether the payment used (COMPLETE), holds (PENDING, PROCESSING, or no invoice
-- yet and recent) or released (FAILED, or never became an invoice) a use of the
-- link's usage_limit. Keyed by command id, so a retried request (same
-- Idempotency-Key) holds one use, not two.
CREATE TABLE payment_link_uses (
    link_id     uuid NOT NULL REFERENCES payment_links (link_id),
    command_id  text NOT NULL,
    invoice_id  text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (link_id, command_id)
);

-- The link a checkout session was opened for (NULL: an ordinary session).
ALTER TABLE checkouts ADD COLUMN payment_link_id uuid REFERENCES payment_links (link_id);
