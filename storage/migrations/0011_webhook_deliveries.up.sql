-- One row per event and webhook: the exact bytes to send (kept for replay), the
-- delivery status and the retry schedule; and every attempt.
CREATE TABLE webhook_deliveries (
    event_id         text NOT NULL,
    webhook_id       text NOT NULL REFERENCES webhooks (webhook_id) ON DELETE CASCADE,
    merchant_id      text NOT NULL,
    topic            text NOT NULL,
    body             bytea NOT NULL,
    status           text NOT NULL DEFAULT 'PENDING',
    attempts         integer NOT NULL DEFAULT 0,
    next_attempt_at  timestamptz NOT NULL DEFAULT now(),
    last_status      integer,
    last_error       text,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (event_id, webhook_id)
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE status IN ('PENDING', 'PROCESSING');
CREATE INDEX webhook_deliveries_merchant ON webhook_deliveries (merchant_id, created_at DESC);

CREATE TABLE webhook_attempts (
    attempt_id   bigserial PRIMARY KEY,
    event_id     text NOT NULL,
    webhook_id   text NOT NULL,
    at           timestamptz NOT NULL DEFAULT now(),
    http_status  integer,
    latency_ms   integer NOT NULL,
    error        text,
    replay       boolean NOT NULL DEFAULT false
);
CREATE INDEX webhook_attempts_event ON webhook_attempts (event_id, webhook_id, at);
