-- Events Kafka refuses for good (a record too large for the broker, say) move here
-- instead of blocking the outbox behind them forever. An operator inspects and
-- replays them; paysvc_relay_dead_letters_total alerts.
CREATE TABLE outbox_dead (
    outbox_id    bigint PRIMARY KEY,
    event_id     text NOT NULL,
    topic        text NOT NULL,
    record_key   text NOT NULL,
    merchant_id  text NOT NULL,
    body         bytea NOT NULL,
    created_at   timestamptz NOT NULL,
    failed_at    timestamptz NOT NULL DEFAULT now(),
    error        text NOT NULL
);
