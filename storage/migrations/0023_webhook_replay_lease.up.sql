-- Webhook delivery statuses follow the spec's order, PENDING -> PROCESSING ->
-- DELIVERED or FAILED, on every path (issue 12). A replay is sent by the API outside
-- the dispatcher's queues, also for a delivery that is already DELIVERED or FAILED:
-- while it is in flight the event record shows PROCESSING. That is a lease, not a
-- status, so that an API process dying mid-replay cannot leave a finished delivery
-- PROCESSING for ever (no queue would ever take it again): once replaying_until has
-- passed the record shows its stored status again. The replay's answer clears it.
-- A nullable column without a default: no table rewrite.
ALTER TABLE webhook_deliveries ADD COLUMN replaying_until timestamptz;
