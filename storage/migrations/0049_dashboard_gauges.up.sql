-- Partial indexes for the dashboards' database gauges (docs/metrics.md, "Database
-- gauges"): each holds only the rows its gauge counts, so a scrape reads a few
-- index pages however large the table grows.
CREATE INDEX payout_files_awaiting_approval ON payout_files (created_at) WHERE status = 'PREVIEW-AND-APPROVE';
CREATE INDEX webhooks_disabled ON webhooks (merchant_id) WHERE NOT is_active;
