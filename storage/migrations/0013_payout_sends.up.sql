-- What a live payout rail has sent, or may have sent, to its provider: one row per
-- transaction, claimed before the request leaves. A transaction with a row is never
-- sent again (a second send could pay twice); see actors/rails/payouts_daraja.go.
CREATE TABLE payout_sends (
    transaction_id  text PRIMARY KEY,
    provider        text NOT NULL,
    -- SENDING (claimed; the request may be in flight), ACCEPTED, REFUSED or UNKNOWN
    state           text NOT NULL,
    reference       text NOT NULL DEFAULT '',  -- the provider's id (Daraja's ConversationID)
    description     text NOT NULL DEFAULT '',  -- the refusal, or what made the outcome unknown
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now()
);
