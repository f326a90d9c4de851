-- Commands the engine could not commit for a reason retrying cannot fix (bad bytes,
-- a numeric overflow, a constraint): each is answered with a refusal, marked
-- processed, and kept here with its offset and the error, so the partition goes on
-- and an operator can see what was set aside (ops/runbooks.md, "Quarantined commands").
CREATE TABLE command_quarantine (
    topic            text NOT NULL,
    kafka_partition  integer NOT NULL,
    kafka_offset     bigint NOT NULL,
    command_id       text NOT NULL,
    merchant_id      text NOT NULL,
    command_type     text NOT NULL,
    -- SQLSTATE of a database refusal, or a paysvc code (panic, encode)
    error_code       text NOT NULL,
    error            text NOT NULL,
    -- the record's exact bytes: they may hold what PostgreSQL cannot store as text
    record           bytea NOT NULL,
    quarantined_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (topic, kafka_partition, kafka_offset)
);
CREATE INDEX command_quarantine_merchant ON command_quarantine (merchant_id, quarantined_at);
