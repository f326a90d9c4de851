-- Webhook signing (issue 9): the challenge keys X-SERVICE-Signature (the spec's) and is
-- echoed in delivery bodies only for webhooks that opt in (include_challenge); the
-- Standard Webhooks headers are signed with a separate server-generated secret
-- (signing_secret, the raw key bytes of whsec_<base64>), so a body seen by anyone no
-- longer lets them forge webhook-signature.
--
-- Existing webhooks get include_challenge false like new ones (the echo was the leak;
-- a merchant whose code compares it can PATCH it back on) and a fresh 32-byte secret
-- from gen_random_uuid (a CSPRNG: two version-4 uuids, 244 random bits; the volatile
-- default is computed for each existing row), which their owners obtain with
-- rotate-secret. The API makes its own (32 bytes from crypto/rand); the default also
-- covers any other insert. Stored delivery bodies are left as they are: they were
-- sent already, and retention removes them.
ALTER TABLE webhooks ADD COLUMN include_challenge boolean NOT NULL DEFAULT false;
ALTER TABLE webhooks ADD COLUMN signing_secret bytea NOT NULL
    DEFAULT (uuid_send(gen_random_uuid()) || uuid_send(gen_random_uuid()));
ALTER TABLE webhooks ADD CONSTRAINT webhooks_signing_secret_length CHECK (length(signing_secret) >= 24);
