-- Secrets the service makes for itself (the key that signs client-side status
-- tokens). Kept in the database so every instance shares them and they survive
-- restarts; created on first use.
CREATE TABLE service_secrets (
    name        text PRIMARY KEY,
    value       bytea NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);
