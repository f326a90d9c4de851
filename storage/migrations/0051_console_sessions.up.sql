-- Merchant console sessions (api/console*.go, docs/security.md "Console sessions").
-- A session is a secret key entered once: the row names the key, never holds it, and
-- holds only the SHA-256 of the session token that the browser's cookie carries, so a
-- read of this table opens no session. The key's permissions, revocation and its
-- merchant's status are read through key_id on every request, never copied here.
CREATE TABLE console_sessions (
    token_hash    bytea PRIMARY KEY,
    merchant_id   text NOT NULL REFERENCES merchants (merchant_id),
    key_id        text NOT NULL REFERENCES api_keys (key_id),
    environment   text NOT NULL CHECK (environment IN ('sandbox', 'live')),
    -- The synchroniser token every form carries; useless without the cookie.
    csrf_token    text NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    last_seen_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX console_sessions_key ON console_sessions (key_id);
CREATE INDEX console_sessions_seen ON console_sessions (last_seen_at);

-- The console's collection search looks a reference or a phone number up among the
-- merchant's invoices; without these a search of a merchant with a million
-- collections reads them all. The invoice id is the primary key and the email has
-- invoices_email_lower already.
CREATE INDEX invoices_merchant_ref ON invoices (merchant_id, api_ref) WHERE api_ref IS NOT NULL;
CREATE INDEX invoices_merchant_account ON invoices (merchant_id, (data ->> 'account'));
