-- The signature headers each attempt actually sent (Standard Webhooks): webhook-id,
-- webhook-timestamp and webhook-signature, as the merchant's console shows them per
-- attempt (issue 25), so a merchant whose endpoint refused a request can check its
-- verification against exactly what was sent. webhook-signature is an HMAC of the
-- id, the timestamp and the body under the webhook's signing secret: no secret, but
-- the merchant's own, shown only on its console (docs/security.md). NULL for
-- attempts recorded before this migration.
ALTER TABLE webhook_attempts
    ADD COLUMN signed_id        text,
    ADD COLUMN signed_timestamp text,
    ADD COLUMN signature        text;
