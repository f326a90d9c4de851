-- A rotated webhook signing secret stays valid for a window (docs/security.md,
-- "Webhook signing"): rotate-secret moves the retired key here with the moment it
-- stops signing, and until then every delivery's webhook-signature carries a
-- signature with it after the one with the new key, so a receiver that has not yet
-- deployed the new secret keeps verifying. Only one previous key is kept: a second
-- rotation inside the window replaces it with the key that second rotation retires.
-- Both NULL when there is none (never rotated, or rotated with no window). Past its
-- expiry the key signs nothing; the next rotation overwrites it.
ALTER TABLE webhooks
    ADD COLUMN previous_signing_secret    bytea,
    ADD COLUMN previous_secret_expires_at timestamptz;
ALTER TABLE webhooks ADD CONSTRAINT webhooks_previous_signing_secret_pair
    CHECK ((previous_signing_secret IS NULL) = (previous_secret_expires_at IS NULL)
        AND (previous_signing_secret IS NULL OR length(previous_signing_secret) >= 24));
