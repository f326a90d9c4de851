-- Every lease of a webhook delivery queue gets an id of its own, from a sequence so
-- that an id is never reused, not even after a queue row is deleted and created
-- again. A dispatcher names the lease it holds when it writes its outcomes: if the
-- queue was claimed by someone else since (its lease ran out while it was slow),
-- it records what it sent but neither goes on with the queue nor gives it back, so
-- two dispatchers never send one aggregate's events at the same time, which would
-- deliver a later event before an earlier one is sent again.
CREATE SEQUENCE webhook_queue_leases;
ALTER TABLE webhook_queues ADD COLUMN lease_id bigint NOT NULL DEFAULT nextval('webhook_queue_leases');
