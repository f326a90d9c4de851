-- One-time form tokens of the merchant console (api/console_pages.go, docs/security.md
-- "Console sessions"). A form that creates something the API's Idempotency-Key does
-- not cover (an API key, made by the console itself) carries a one-time token; its
-- first submit records the token's SHA-256 here in the transaction that creates the
-- thing, with what it created, so a second submit of the same form (a double
-- click, a resubmitted POST) finds the row, creates nothing and says what the first
-- made. A token is bound to its session (a MAC under the session's form secret),
-- so a row outliving its session's maximum age can never match again: old rows are
-- deleted at sign-in with the expired sessions.
CREATE TABLE console_form_uses (
    token_hash   bytea PRIMARY KEY,
    merchant_id  text NOT NULL REFERENCES merchants (merchant_id),
    -- What the submit made: the new key's id (never the key).
    result       text NOT NULL,
    used_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX console_form_uses_used ON console_form_uses (used_at);
