-- Webhook configurations (the merchant's endpoints and topic flags), the deliveries
-- of each event to each endpoint, and every attempt. Not money state: the API and
-- the dispatcher write them. challenge is the signing secret the merchant chose: it
-- must be kept to sign, and is never returned by the API.
CREATE TABLE webhooks (
    webhook_id             text PRIMARY KEY,
    merchant_id            text NOT NULL REFERENCES merchants (merchant_id),
    endpoint               text NOT NULL,
    challenge              text NOT NULL,
    is_active              boolean NOT NULL DEFAULT true,
    collection_event       boolean NOT NULL DEFAULT false,
    send_money_event       boolean NOT NULL DEFAULT false,
    reversal_event         boolean NOT NULL DEFAULT false,
    wallet_transfer_event  boolean NOT NULL DEFAULT false,
    subscription_event     boolean NOT NULL DEFAULT false,
    failures_count         integer NOT NULL DEFAULT 0,
    created_at             timestamptz NOT NULL DEFAULT now(),
    updated_at             timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX webhooks_merchant ON webhooks (merchant_id, created_at);
