-- Deliveries to one webhook keep the order of one aggregate's events
-- (docs/api-decisions.md, webhooks). A delivery knows its aggregate (the event
-- record's key) and where the dispatcher read the event (partition and offset: Kafka
-- orders one key's records by offset within its partition). webhook_queues holds one
-- row per webhook and aggregate with deliveries not yet DELIVERED or FAILED; its
-- next_attempt_at says when the oldest of them is due. The dispatcher claims queues,
-- not deliveries, and sends a queue's deliveries in offset order, one at a time: a
-- retrying delivery holds back the later events of its aggregate to that webhook.
-- The queue row is also the lock that orders the dispatcher's writes.
ALTER TABLE webhook_deliveries
    ADD COLUMN agg_key text NOT NULL DEFAULT '',
    ADD COLUMN src_partition integer NOT NULL DEFAULT -1,
    ADD COLUMN src_offset bigint NOT NULL DEFAULT 0;

-- Deliveries recorded before this migration have no known order: each unfinished one
-- becomes its own queue.
UPDATE webhook_deliveries SET agg_key = 'event:' || event_id WHERE status IN ('PENDING', 'PROCESSING');

CREATE TABLE webhook_queues (
    webhook_id       text NOT NULL REFERENCES webhooks (webhook_id) ON DELETE CASCADE,
    topic            text NOT NULL,
    src_partition    integer NOT NULL,
    agg_key          text NOT NULL,
    next_attempt_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (webhook_id, topic, src_partition, agg_key)
);
CREATE INDEX webhook_queues_due ON webhook_queues (next_attempt_at);

INSERT INTO webhook_queues (webhook_id, topic, src_partition, agg_key, next_attempt_at)
    SELECT webhook_id, topic, src_partition, agg_key, min(next_attempt_at) FROM webhook_deliveries
    WHERE status IN ('PENDING', 'PROCESSING') GROUP BY webhook_id, topic, src_partition, agg_key;

-- A queue's unfinished deliveries in order; the due index of 0011 is replaced by the
-- queues' own.
CREATE INDEX webhook_deliveries_queue ON webhook_deliveries (webhook_id, topic, src_partition, agg_key, src_offset)
    WHERE status IN ('PENDING', 'PROCESSING');
DROP INDEX webhook_deliveries_due;
